"""The ``conveyor`` command: queue management shaped like wrangler's ``queues`` commands, producing
and pulling from the shell, running workers, and the demo.

Every command prints tables for people and, with ``--json``, stable machine-readable objects in
Cloudflare's shapes. A refusal is one line on stderr, ``error: <message> (code N)``, with exit code 1;
a usage error exits with 2.
"""
