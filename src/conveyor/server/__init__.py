"""The HTTP service: Cloudflare's Queues REST API (v4 routes), tokens, Prometheus metrics, the workerd binding."""
