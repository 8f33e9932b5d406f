"""The HTTP service: Cloudflare's Queues REST API (v4 routes), tokens, Prometheus metrics, the workerd binding.

It needs the ``server`` extra (``pip install 'conveyor[server]'``); without it, importing any of it
raises :class:`conveyor.extras.MissingExtra`, which says so.
"""

from conveyor.extras import require_extra

require_extra("conveyor.server", "server", ("starlette", "uvicorn", "httptools", "prometheus_client"))
