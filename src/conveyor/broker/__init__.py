"""The broker side: the coordinator and its maintenance services."""
