"""The package CDN: cdnjs's publishing pipeline on Conveyor's workflows, queues and buckets.

An account's CDN watches npm for new versions of the packages it is configured with (cdnjs's
package configs), stages each version's tarball, verifies it, extracts and selects its files,
minifies and compresses them, and publishes and serves them as cdnjs does:

>>> from conveyor import cdn
>>> cdn.init(cv, registry="https://registry.npmjs.org", cron="*/10 * * * *")
>>> cdn.add(cv, "packages/j/jquery.json")           # or a directory of them
>>> app = conveyor.App(cv); cdn.add_workflows(app); app.start()
>>> compressors = conveyor.App(cv); cdn.add_compressor(compressors); compressors.run()  # or
>>> # `conveyor cdn compressor` processes, one per core
>>> cdn.update(cv)                                  # one PackageUpdatesWorkflow now (else the cron)
>>> conveyor.cdn.server.serve(cv, port=8788)         # or `conveyor cdn serve`
>>> conveyor.cdn.runner.run(cv, port=8788)          # all of it at once: `conveyor cdn run`

The parts, each behind the narrowest interface that serves it (dependencies flow down this list):

- :mod:`.errors`: the refusals (codes 17001 and up), each naming the field or the limit.
- :mod:`.config`: ``PackageConfig.parse(data, source)`` — cdnjs's package-config schema (every level
  closed, each bad field an error naming its JSON path) and the checker's rules, with ``fileMap``
  globs compiled once (``FileMap.select(paths)``); ``CdnSettings``, the account's CDN.
- :mod:`.registry`: ``RegistryClient(base_url).versions(name)`` → ``{version: Dist(tarball,
  integrity, shasum)}`` from npm's registry HTTP API, ``fetch(url)`` → bytes; and
  ``new_versions(known, available, ignore)``, cdnjs's rule of which versions to take. It knows
  nothing of buckets or tables.
- :mod:`.tarball`: pure functions of bytes — ``verify(data, dist)`` (sha512 SRI, sha1 fallback),
  ``extract(data)`` → files (regular files only, ``package/`` stripped, nothing escaping the root,
  hidden paths and files over 25 MiB skipped and reported) — so every rule is tested without I/O.
- :mod:`.store`: ``CdnStore``, the only code that writes the tool's tables (the account's settings,
  packages with their configs, versions with their state ``queued → downloaded → processed →
  published`` or ``failed``, each version's selected files, each output file's SHA-512 and SRI
  (and a twin's minifier, or an image's optimiser), one row a file so concurrent children never
  write one row, the search index and the last audit's counts); ``cdn.db`` in a SQLite
  deployment's directory, migrations 0016-0018 in a PostgreSQL one, one ``queries.sql`` for both.
- :mod:`.git`: git sources — a repository's semver tags as versions, each packed from the commit
  its tag named when it was found.
- :mod:`.minify`: ``plan_minified(selected, tarball paths, optimization)`` — cdnjs's rules of
  which files get a ``.min`` twin — and ``minify(dest, data)``, tdewolff/minify in a time-limited
  child process fed on stdin (deterministic; its version recorded with each twin).
- :mod:`.images`: ``optimizes(dest, optimization)`` and ``optimize(dest, data)`` — ``.png``
  through ZopfliPNG and ``.jpg``/``.jpeg`` through mozjpeg's jpegtran, lossless, in place, in a
  time-limited child process (:mod:`.tool_process`, which the minifier uses too); kept only when
  smaller, the optimiser's version recorded with the file.
- :mod:`.compression`: the compression service — ``add_compressor(app)`` (what ``conveyor cdn
  compressor`` runs: the queue ``cdn-compress``, brotli 11 + gzip 9 next to each file) and the
  relay that turns the staging bucket's ``.gz`` notification (queue ``cdn-compressed``) into the
  waiting ProcessingWorkflow's event.
- :mod:`.metadata`: the published catalog in KV (``cdn-metadata``), laid out as cdnjs's metadata
  backend (package record, one version-list entry per version, per-version file list, SRIs and
  object hashes), and ``Catalog``, the one way readers get at it: a version without its
  version-list entry (written last) does not exist for them.
- :mod:`.publish`: ``Publisher``, the steps of ``cdn-publish-version`` (PublishingWorkflow),
  started by the download after its fan-in (:mod:`.pipeline`): files and their ``.br``/``.gz`` to
  the primary and the mirror bucket (an object is written only where absent; other bytes are
  refused and logged), metadata to KV, the search index (FTS5 on SQLite, full-text search on
  PostgreSQL, migration 0018).
- :mod:`.pipeline`: the workflows. ``cdn-package-updates`` (PackageUpdatesWorkflow, on the
  settings' cron) asks the registry per package and starts one ``cdn-download-package``
  (DownloadPackageWorkflow) per new version, with an id derived from the account, name and version
  so a rerun starts none twice. The download stages the tarball in the staging bucket
  (``tarballs/{name}/{version}.tgz``, removed by the bucket's lifecycle rule), verifies, extracts,
  selects and records the files, then fans out one ``cdn-process-file`` (ProcessingWorkflow) per
  file and fans in with a ``conveyor.Counter`` (docs/workflows.md's recipe): it waits, holding no
  worker, for the counter's event at zero. A bad tarball ends it with a ``NonRetryableError`` and
  the version ``failed`` with the reason, nothing recorded as published. After the fan-in it starts
  the version's PublishingWorkflow (id derived likewise).
- ProcessingWorkflow, per file: its SHA-512 and SRI; its minified twin (written to staging); one
  compression job per output and a wait (hibernating) for each output's event; both outputs
  recorded together; then the count down. A failed child still counts down, and its parent then
  fails the version.
- :mod:`.sources`, :mod:`.api`, :mod:`.server`: ``cdn serve`` — files from an in-process cache,
  the primary (behind a circuit breaker) or the mirror, with cdnjs's headers; the ``/libraries``
  API in api.cdnjs.com's shapes; ``/metrics``.
- :mod:`.importer`: ``cdn import`` (an ``ajax/libs`` tree, one queue message per package);
  :mod:`.audit`: ``cdn audit [--repair]``.
- :mod:`.client`: ``init``, ``status``, ``add``, ``update``, ``publish``: what ``conveyor cdn`` calls.
- ``conveyor trace`` of an update shows it end to end: downloads under the update's steps,
  processing under the fan-out, publishing under the download's last step; each compression wait's
  event names the job (its message id, sent by the processing step) and the compressor that did it.
- :mod:`.runner`: ``run`` (``conveyor cdn run``): the workflows in its process, compressor child
  processes (one per core by default, replaced when one dies) and the server, stopped in that
  order at SIGINT/SIGTERM.

The contract between processing and publishing. After a version's ProcessingWorkflows finish and
the DownloadPackageWorkflow's fan-in marks it ``processed``:

- the staging bucket holds, for every output file ``dest`` (each selected original and each
  minified twin), ``files/{name}/{version}/{dest}`` (the uncompressed bytes) and, for every
  extension except ``.woff2``, ``files/{name}/{version}/{dest}.br`` (brotli quality 11) and
  ``files/{name}/{version}/{dest}.gz`` (gzip level 9);
- ``CdnStore.files(account, name, version)`` lists every output file, originals and twins, with
  its ``size``, ``sha512`` (hex) and ``sri`` (``.js``/``.css`` only, originals and ``.min`` alike);
  a twin also names its original (``source``) and the minifier that made it (``tool``,
  ``tool_version``); an original has no ``source``, and a ``tool`` only when it is an image that
  was optimised in place (``zopflipy`` for ``.png``, ``mozjpeg-lossless-optimization`` for
  ``.jpg``/``.jpeg``).
"""

from __future__ import annotations

from conveyor.cdn.client import add, init, publish, status, update
from conveyor.cdn.compression import add_compressor
from conveyor.cdn.config import CdnSettings, FileMap, PackageConfig
from conveyor.cdn.errors import (
    CdnNotInitialized,
    CdnUnavailable,
    IntegrityMismatch,
    InvalidPackageConfig,
    InvalidTarball,
    PackageNotFound,
    RegistryError,
    UnknownPackage,
)
from conveyor.cdn.pipeline import DOWNLOAD_WORKFLOW, PUBLISH_WORKFLOW, UPDATES_WORKFLOW, add_workflows

__all__ = [
    "DOWNLOAD_WORKFLOW",
    "PUBLISH_WORKFLOW",
    "UPDATES_WORKFLOW",
    "CdnNotInitialized",
    "CdnSettings",
    "CdnUnavailable",
    "FileMap",
    "IntegrityMismatch",
    "InvalidPackageConfig",
    "InvalidTarball",
    "PackageConfig",
    "PackageNotFound",
    "RegistryError",
    "UnknownPackage",
    "add",
    "add_compressor",
    "add_workflows",
    "init",
    "publish",
    "status",
    "update",
]
