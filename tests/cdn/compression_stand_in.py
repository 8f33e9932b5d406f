"""A stand-in for the compression service until it lands (branch ``cdnproc``): ProcessingWorkflow's
step, wrapped so that after it the file's ``.br`` (quality 11) and ``.gz`` (level 9) are in the
staging bucket, as the compressor will have left them. Publishing needs them and refuses a version
without them. Remove this module when the compressor writes them.

``install()`` patches the class for a worker subprocess (its app module calls it); the suite's
``compression`` fixture patches it for the test's own process, and can switch it off."""

from __future__ import annotations

import gzip
from typing import Any

import brotli

from conveyor.cdn.metadata import object_names
from conveyor.cdn.pipeline import _Pipeline, file_key


class StandIn:
    enabled = True


def compressed(data: bytes) -> tuple[bytes, bytes]:
    return brotli.compress(data, quality=11), gzip.compress(data, compresslevel=9, mtime=0)


def wrap(original: Any, switch: type[StandIn] | StandIn = StandIn) -> Any:
    def process(self: _Pipeline, params: dict[str, Any]) -> str | None:
        result = original(self, params)
        if switch.enabled:
            name, version, dest = params["name"], params["version"], params["dest"]
            staging = self.cv.bucket(self.settings.staging_bucket)
            if len(object_names(dest)) > 1:
                br, gz = compressed(staging.get(file_key(name, version, dest)).bytes())
                staging.put(file_key(name, version, dest + ".br"), br)
                staging.put(file_key(name, version, dest + ".gz"), gz)
        return result

    return process


def install() -> None:
    _Pipeline.process = wrap(_Pipeline.process)  # type: ignore[method-assign]
