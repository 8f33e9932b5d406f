"""Missing, truncated and foreign files are refused with errors that say what is wrong."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest

from conveyor.errors import ConveyorError
from conveyor.mmapsync import DataSetNotFound, ForeignFile, Synchronizer, TruncatedFile
from conveyor.mmapsync.feature_store import FeatureStore


def _read(prefix: str) -> bytes:
    with Synchronizer(prefix).read() as data:
        return bytes(data)


def test_a_missing_data_set_is_not_found(prefix: str) -> None:
    with pytest.raises(DataSetNotFound, match="does not exist"):
        _read(prefix)
    with pytest.raises(DataSetNotFound):
        Synchronizer(prefix).version()


def test_a_missing_data_file_is_not_found(prefix: str) -> None:
    Synchronizer(prefix).write(b"payload")
    os.unlink(f"{prefix}_data_1")
    with pytest.raises(DataSetNotFound, match="data_1"):
        _read(prefix)


def test_a_truncated_data_file_is_refused_instead_of_faulting(prefix: str) -> None:
    Synchronizer(prefix).write(b"x" * 10_000)
    os.truncate(f"{prefix}_data_1", 4_000)
    with pytest.raises(TruncatedFile, match="needs 10000"):
        _read(prefix)


@pytest.mark.parametrize("length", [0, 20, 100])
def test_a_truncated_state_file_is_refused(prefix: str, length: int) -> None:
    Synchronizer(prefix).write(b"payload")
    os.truncate(f"{prefix}_state", length)
    with pytest.raises(TruncatedFile, match="_state is"):
        _read(prefix)


def test_a_foreign_state_file_is_refused(prefix: str) -> None:
    Path(f"{prefix}_state").write_bytes(b"# not a state file\n" * 10)
    with pytest.raises(ForeignFile, match="not an mmapsync state file"):
        _read(prefix)
    with pytest.raises(ForeignFile):
        Synchronizer(prefix).write(b"would overwrite")


def test_a_state_file_of_another_layout_version_is_refused(prefix: str) -> None:
    Synchronizer(prefix).write(b"payload")
    with open(f"{prefix}_state", "r+b") as file:
        file.seek(16)
        file.write((99).to_bytes(4, "little"))
    with pytest.raises(ForeignFile, match="layout 99"):
        _read(prefix)


def test_a_state_file_longer_than_its_slot_table_is_refused(prefix: str) -> None:
    Synchronizer(prefix).write(b"payload")
    with open(f"{prefix}_state", "ab") as file:
        file.write(b"\0" * 64)
    with pytest.raises(ForeignFile, match="its header implies"):
        _read(prefix)


def test_a_feature_store_over_data_that_is_not_a_table_is_refused(prefix: str) -> None:
    Synchronizer(prefix).write(b"just some bytes that are long enough to hold a header" * 2)
    with pytest.raises(ForeignFile, match="not a FeatureStore table"), FeatureStore(prefix).read():
        pass


def test_a_feature_store_with_a_short_table_is_truncated(prefix: str) -> None:
    store = FeatureStore(prefix)
    store.publish(np.arange(10, dtype=np.uint64), np.ones((10, 4), dtype=np.float32))
    with Synchronizer(prefix).read() as data:
        clipped = bytes(data[:-16])
    Synchronizer(prefix).write(clipped)
    with pytest.raises(TruncatedFile, match="feature table needs"), FeatureStore(prefix).read():
        pass


def test_every_refusal_is_a_conveyor_error(prefix: str) -> None:
    with pytest.raises(ConveyorError):
        _read(prefix)


def test_a_feature_table_whose_header_contradicts_itself_is_refused(prefix: str) -> None:
    header = struct.pack("<8sIIQQ32x", b"CVYFEAT1", 1, 4, 10, 3)  # 10 keys cannot fit 3 entries
    Synchronizer(prefix).write(header + bytes(4096))
    with pytest.raises(ForeignFile, match="inconsistent"), FeatureStore(prefix).read():
        pass
