"""Storage beside the queues: buckets and KV namespaces (``conveyor.storage.kv``)."""
