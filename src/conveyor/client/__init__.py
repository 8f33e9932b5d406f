"""Sync and async facades over an engine (or, later, over HTTP)."""
