"""``conveyor cdn audit [--repair]``: every published object of KV checked in the primary and the
mirror bucket — there, of the published size, of the published SHA-512 — so no divergence between
the two stores goes unnoticed; ``--repair`` writes the published bytes back where they diverge.

The truth is KV's ``objects/{name}/{version}`` (size and SHA-512 of every object published). A
repair copies the object from the bucket that still has it as published; an object that no bucket
has intact is reported ``lost`` (nothing can restore it but a re-import). The counts per bucket and
outcome (``ok``, ``missing``, ``size``, ``sha512``, ``unreachable``, ``repaired``, ``lost``) are recorded for
``cdn serve``'s ``/metrics``.

>>> report = audit(cv, repair=True)
>>> report.counts                         # {("cdn", "ok"): 40, ("cdn-mirror", "repaired"): 1}
>>> report.divergences                    # [Divergence("cdn-mirror", "widget/1.0.0/widget.js", "missing", True)]
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections import Counter

import conveyor
from conveyor.cdn.metadata import Catalog, metadata_namespace
from conveyor.cdn.pipeline import account_of
from conveyor.cdn.publish import content_type, published_key
from conveyor.cdn.store import CdnStore


@dataclasses.dataclass(frozen=True)
class Divergence:
    bucket: str
    key: str
    problem: str  # missing, size, sha512 or unreachable
    repaired: bool


@dataclasses.dataclass
class AuditReport:
    objects: int = 0
    counts: Counter[tuple[str, str]] = dataclasses.field(default_factory=Counter)
    divergences: list[Divergence] = dataclasses.field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "objects": self.objects,
            "counts": {f"{bucket}/{outcome}": n for (bucket, outcome), n in sorted(self.counts.items())},
            "divergences": [dataclasses.asdict(d) for d in self.divergences],
        }


def _check(bucket: conveyor.Bucket, key: str, size: int, sha512: str) -> tuple[str, bytes | None]:
    """``ok`` with the bytes, or what is wrong."""
    try:
        data = bucket.get(key).bytes()
    except conveyor.BucketUnreachable:
        return "unreachable", None
    except conveyor.ConveyorError:  # no such object, or its row outlived the bytes in the service
        return "missing", None
    if len(data) != size:
        return "size", None
    if hashlib.sha512(data).hexdigest() != sha512:
        return "sha512", None
    return "ok", data


def audit(cv: conveyor.Conveyor, *, repair: bool = False) -> AuditReport:
    """Check (and with ``repair``, mend) every published object in the primary and the mirror."""
    store = CdnStore.open(cv.deployment)
    try:
        settings = store.settings(account_of(cv))
        names = [settings.primary_bucket, *([settings.mirror_bucket] if settings.mirror_bucket else [])]
        buckets = [cv.bucket(name) for name in names]
        catalog = Catalog(metadata_namespace(cv))
        report = AuditReport()
        for name in catalog.package_names():
            for version in catalog.versions(name):
                for obj, (size, sha512) in sorted(catalog.objects(name, version).items()):
                    key = published_key(name, version, obj)
                    report.objects += 1
                    found = {bucket.name: _check(bucket, key, int(size), sha512) for bucket in buckets}
                    intact = next((data for outcome, data in found.values() if outcome == "ok"), None)
                    for bucket in buckets:
                        outcome, _ = found[bucket.name]
                        if outcome == "ok":
                            report.counts[(bucket.name, "ok")] += 1
                            continue
                        mended = False
                        if repair and intact is not None and outcome != "unreachable":
                            bucket.put(key, intact, content_type=content_type(key))
                            mended = True
                        report.counts[(bucket.name, "repaired" if mended else outcome)] += 1
                        if repair and intact is None:
                            report.counts[(bucket.name, "lost")] += 1
                        report.divergences.append(Divergence(bucket.name, key, outcome, mended))
        store.record_audit(settings.account, dict(report.counts), now_ms=int(time.time() * 1000))
        return report
    finally:
        store.close()
