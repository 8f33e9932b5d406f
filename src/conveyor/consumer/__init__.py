"""Push consumers: the dispatcher, the autoscaler and the handler runner behind ``App``."""
