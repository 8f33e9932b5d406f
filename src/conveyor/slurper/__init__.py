"""Super Slurper: bucket-to-bucket migration jobs on Conveyor's own queues.

A job copies every object of a source bucket (any S3-compatible service, ``vendor: "s3"``, or a
Conveyor bucket of the job's account, ``vendor: "r2"``) into a target bucket (a Conveyor bucket, or
an S3-compatible one), as Cloudflare rebuilt Super Slurper on Queues:

>>> job = cv.slurper.create_job(
...     source={"vendor": "s3", "endpoint": "https://s3.example.com", "region": "us-east-1",
...             "bucket": "photos", "secret": {"access_key_id": "...", "secret_access_key": "..."},
...             "path_prefix": "2024/"},
...     target={"vendor": "r2", "bucket": "photos"},
...     overwrite=True)
>>> job.progress()          # JobProgress(objects, transferred_objects, skipped_objects, failed_objects, ...)
>>> job.pause(); job.resume(); job.abort(); job.logs()

The parts, each behind the narrowest interface that serves it:

- :mod:`.model`: what a job is (``SourceSpec``, ``TargetSpec``, ``JobInfo``, ``JobProgress``,
  ``JobLog``), statuses ``running paused aborted completed`` and Cloudflare's log types, and the
  checks that turn a request's ``source``/``target`` (camelCase or snake_case) into specs — every
  bad field an error naming it, unknown fields refused.
- :mod:`.store`: ``JobStore``, the only code that changes the tool's tables; each state transition
  is one transaction (listing a page, locking a key, counting it, pausing, completing). The tables
  are the tool's own: ``slurper.db`` in a SQLite deployment's directory, migration 0012 in a
  PostgreSQL one; both engines run the same named queries (``queries.sql``).
- :mod:`.endpoints`: a bucket as the pipeline sees it — ``list_page(after)``, ``open(key)``,
  ``head(key)``, ``put(key, chunks, ...)`` — over a Conveyor bucket or an S3-compatible service
  (:mod:`.s3`, signed requests of its own, so every key, storage class and continuation token is
  the service's exactly).
- :mod:`.pipeline`: the consumers of three real Conveyor queues of the job's account,
  ``slurper-list`` → ``slurper-transfer`` → ``slurper-lifecycle`` (dead letters in
  ``slurper-transfer-dlq``), run by any worker: ``conveyor.slurper.add_consumers(app)``.
- :mod:`.client`: ``cv.slurper`` (``create_job``, ``job``, ``list_jobs``, ``abort_all``) and the
  ``Job`` handle; the REST routes (``server/slurper_routes.py``) and the CLI call the same methods.

How every object is counted exactly once despite duplicate deliveries, retries and crashes:

1. A listing message carries its sequence number; the page's keys and the job's next sequence
   number commit in one transaction, so a duplicate or retried listing is short-circuited (the
   latest one re-sends its page's transfers and its successor, which duplicates are harmless to).
2. A transfer locks its key (the key's row, owned by the message id) before it copies, and the
   key's final state (``transferred``, ``skipped``, ``failed``) and the job's counts change in one
   transaction with the unlock; a message for a finished or another message's locked key is a
   duplicate. (A batch of transfer messages takes its keys' locks in one transaction and counts
   its copies in one: each key's unlock and count still commit together.)
3. Last failsafe: when a transfer message comes back to a key it had locked (its earlier delivery
   died or failed), an object already in the target, written after the job started, is counted
   as transferred without being copied again (a copy whose count a crash lost).
4. The lifecycle consumer completes a job only when its listing is finished and
   ``transferred + skipped + failed == objects``.
"""

from conveyor.slurper.client import Job, PlannedObject, Slurper
from conveyor.slurper.errors import InvalidJob, InvalidJobState, JobNotFound, TooManyJobs
from conveyor.slurper.model import JobInfo, JobLog, JobProgress
from conveyor.slurper.pipeline import add_consumers

__all__ = [
    "InvalidJob",
    "InvalidJobState",
    "Job",
    "JobInfo",
    "JobLog",
    "JobNotFound",
    "JobProgress",
    "PlannedObject",
    "Slurper",
    "TooManyJobs",
    "add_consumers",
]
