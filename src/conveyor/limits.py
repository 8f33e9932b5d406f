"""Every limit and default, in one place, with where it comes from.

The numbers are Cloudflare Queues' published limits (see ``shared/reference/cloudflare-queues.md``);
Conveyor keeps them so that code written against one runs unchanged on the other.
"""

from __future__ import annotations

import re

# A message's encoded body; Cloudflare measures 128 KB as 128,000 bytes.
MAX_MESSAGE_BYTES = 128_000
# A batch send: count and total encoded bytes.
MAX_BATCH_MESSAGES = 100
MAX_BATCH_BYTES = 256_000
# Every delay (send, batch, retry, queue delivery delay): 0 ..= 24 h.
MAX_DELAY_SECONDS = 86_400
# Retention: 60 s ..= 14 d, default 4 d.
DEFAULT_RETENTION_SECONDS = 345_600
MIN_RETENTION_SECONDS = 60
MAX_RETENTION_SECONDS = 1_209_600

# Push consumers.
DEFAULT_MAX_BATCH_SIZE = 10
MAX_BATCH_SIZE = 100
DEFAULT_MAX_BATCH_TIMEOUT = 5.0
MAX_BATCH_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 3
MAX_RETRIES = 100
MAX_CONCURRENCY = 250
# How long one handler invocation may run before it counts as a failure (Cloudflare: 15 min).
DEFAULT_HANDLER_TIMEOUT = 15 * 60.0

# Pull consumers.
DEFAULT_PULL_BATCH_SIZE = 5
DEFAULT_VISIBILITY_TIMEOUT_MS = 30_000
MAX_VISIBILITY_TIMEOUT_MS = 12 * 3600 * 1000

# \Z, not $: `$` also matches before a trailing newline, which would let "q\n" through `.match`.
QUEUE_NAME_PATTERN = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")
ID_PATTERN = re.compile(r"^[0-9a-f]{32}\Z")

# Sharding: the coordinator adds a shard to a queue whose write rate per shard stays above this for
# one sampling window, up to MAX_SHARDS. 5,000 msg/s is Cloudflare's per-queue throughput.
SHARD_SPLIT_RATE = 5_000.0
SHARD_SAMPLE_SECONDS = 5.0
MAX_SHARDS = 16
