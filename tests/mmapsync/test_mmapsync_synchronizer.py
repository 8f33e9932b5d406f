"""Synchronizer in one process: publishing, reading in place, versions, the grace period."""

from __future__ import annotations

import threading
import zlib

import pytest

from conveyor.mmapsync import NothingPublished, ReadersStillActive, Synchronizer, Version, checksum


def test_read_yields_the_last_published_bytes(prefix: str) -> None:
    sync = Synchronizer(prefix)
    sync.write(b"first")
    sync.write(b"second version")
    with sync.read() as data:
        assert bytes(data) == b"second version"


def test_a_reader_in_another_instance_sees_each_new_version(prefix: str) -> None:
    writer, reader = Synchronizer(prefix), Synchronizer(prefix)
    for payload in (b"a", b"bb" * 1000, b"", b"ccc"):
        writer.write(payload)
        with reader.read() as data:
            assert bytes(data) == payload


def test_read_is_a_read_only_view_of_the_mapped_file_not_a_copy(prefix: str) -> None:
    sync = Synchronizer(prefix)
    sync.write(b"x" * 4096)
    with sync.read() as data:
        assert isinstance(data, memoryview)
        assert data.readonly
        with pytest.raises(TypeError):
            data[0] = 0


def test_version_packs_index_size_and_checksum_of_the_published_data(prefix: str) -> None:
    sync = Synchronizer(prefix)
    first = sync.write(b"hello")
    assert first == Version(index=1, size=5, checksum=zlib.crc32(b"hello") & 0xFFFFFF)
    second = sync.write(b"world!")
    assert (second.index, second.size, second.checksum) == (0, 6, checksum(b"world!"))
    assert Synchronizer(prefix).version() == second
    assert Version.unpack(second.word) == second


def test_version_word_follows_the_published_bit_layout() -> None:
    word = Version(index=1, size=(1 << 39) - 1, checksum=0xABCDEF).word
    assert word & 1 == 1
    assert (word >> 1) & ((1 << 39) - 1) == (1 << 39) - 1
    assert word >> 40 == 0xABCDEF


def test_reading_before_the_first_write_says_nothing_was_published(prefix: str) -> None:
    writer = Synchronizer(prefix)
    with pytest.raises(RuntimeError), writer.writing(3) as target:  # creates the files, publishes nothing
        target[:] = b"abc"
        raise RuntimeError("abandon the first write")
    with pytest.raises(NothingPublished), Synchronizer(prefix).read():
        pass
    with pytest.raises(NothingPublished):
        Synchronizer(prefix).version()


def test_an_empty_even_version_is_still_published(prefix: str) -> None:
    sync = Synchronizer(prefix)
    sync.write(b"one")
    assert sync.write(b"") == Version(index=0, size=0, checksum=0)
    with Synchronizer(prefix).read() as data:
        assert bytes(data) == b""


def test_a_write_block_that_raises_publishes_nothing(prefix: str) -> None:
    sync = Synchronizer(prefix)
    published = sync.write(b"kept")
    with pytest.raises(RuntimeError), sync.writing(7) as target:
        target[:] = b"dropped"
        raise RuntimeError("build failed")
    assert sync.version() == published
    with sync.read() as data:
        assert bytes(data) == b"kept"


def test_nested_reads_share_one_version_and_release_only_at_the_outermost(prefix: str) -> None:
    sync = Synchronizer(prefix)
    sync.write(b"v1")
    with sync.read() as outer:
        with sync.read() as inner:
            assert inner is outer
        sync.write(b"v2")  # goes to the idle file; the held one is still pinned
        with pytest.raises(ReadersStillActive):
            sync.write(b"v3", grace=0.05)
        assert bytes(outer) == b"v1"
    sync.write(b"v3", grace=0)
    with sync.read() as data:
        assert bytes(data) == b"v3"


def test_a_live_reader_past_the_grace_period_makes_the_write_fail_not_tear(prefix: str) -> None:
    writer, reader = Synchronizer(prefix), Synchronizer(prefix)
    writer.write(b"pinned")
    writer.write(b"other")
    with reader.read() as held:
        writer.write(b"next")  # the reader holds "other"; "pinned"'s file is free
        with pytest.raises(ReadersStillActive, match="grace"):
            writer.write(b"would overwrite other", grace=0.1)
        assert bytes(held) == b"other"
    assert writer.version().checksum == checksum(b"next")


def test_closing_gives_the_reader_slot_back(prefix: str) -> None:
    writer = Synchronizer(prefix, slots=1)
    writer.write(b"data")
    for _ in range(3):
        with Synchronizer(prefix) as reader, reader.read() as data:
            assert bytes(data) == b"data"


def test_threads_reading_one_instance_never_see_a_torn_version(prefix: str) -> None:
    sync = Synchronizer(prefix)
    writer = Synchronizer(prefix)
    writer.write(b"\0" * 8)
    stop = threading.Event()
    torn: list[bytes] = []

    def read_until_stopped() -> None:
        while not stop.is_set():
            with sync.read() as data:
                if len(set(bytes(data))) != 1:
                    torn.append(bytes(data))

    threads = [threading.Thread(target=read_until_stopped) for _ in range(3)]
    for thread in threads:
        thread.start()
    for i in range(40):
        while True:
            try:
                writer.write(bytes([i % 256]) * (1024 + i), grace=0.2)
                break
            except ReadersStillActive:
                continue
    stop.set()
    for thread in threads:
        thread.join()
    assert torn == []
