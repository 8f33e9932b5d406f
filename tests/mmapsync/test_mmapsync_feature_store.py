"""FeatureStore: u64 keys to float32 vectors, looked up in place, published in one swap."""

from __future__ import annotations

import numpy as np
import pytest

from conveyor.mmapsync import ReadersStillActive
from conveyor.mmapsync.errors import DuplicateKey
from conveyor.mmapsync.feature_store import FeatureStore

DIM = 16


def _dataset(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    keys = np.unique(rng.integers(0, np.iinfo(np.uint64).max, count, dtype=np.uint64, endpoint=True))
    return keys, rng.random((len(keys), DIM), dtype=np.float32)


def test_every_published_key_finds_its_vector(prefix: str) -> None:
    keys, vectors = _dataset(5_000)
    FeatureStore(prefix).publish(keys, vectors)
    with FeatureStore(prefix).read() as table:
        assert len(table) == len(keys)
        assert table.dim == DIM
        for i in range(0, len(keys), 97):
            np.testing.assert_array_equal(table[int(keys[i])], vectors[i])
            np.testing.assert_array_equal(table.get(keys[i]), vectors[i])  # a NumPy integer key
        np.testing.assert_array_equal(table.rows(keys), np.arange(len(keys)))


def test_lookups_are_read_only_views_into_the_mapped_table(prefix: str) -> None:
    keys, vectors = _dataset(100)
    FeatureStore(prefix).publish(keys, vectors)
    with FeatureStore(prefix).read() as table:
        vector = table.get(int(keys[3]))
        assert not vector.flags.owndata
        assert not vector.flags.writeable
        assert np.shares_memory(vector, table.values)
        views = table.get_many(keys[[5, 1, 5]])
        assert all(np.shares_memory(view, table.values) for view in views)
        np.testing.assert_array_equal(views[2], vectors[5])


def test_missing_keys_raise_or_come_back_as_minus_one(prefix: str) -> None:
    FeatureStore(prefix).publish([1, 2, 3], np.ones((3, DIM)))
    with FeatureStore(prefix).read() as table:
        with pytest.raises(KeyError):
            table.get(4)
        assert 2 in table and 4 not in table
        np.testing.assert_array_equal(table.rows([3, 4, 1]), [2, -1, 0])
        with pytest.raises(KeyError, match="4"):
            table.take([1, 4])
        with pytest.raises(KeyError, match="4"):
            table.get_many([4])


def test_take_gathers_a_batch_into_one_matrix(prefix: str) -> None:
    keys, vectors = _dataset(1_000)
    FeatureStore(prefix).publish(keys, vectors)
    picks = np.array([10, 0, 999, 10])
    with FeatureStore(prefix).read() as table:
        np.testing.assert_array_equal(table.take(keys[picks]), vectors[picks])
        out = np.empty((len(picks), DIM), dtype=np.float32)
        table.take(keys[picks], out=out)
        np.testing.assert_array_equal(out, vectors[picks])


def test_extreme_keys_and_an_empty_table_work(prefix: str) -> None:
    store = FeatureStore(prefix)
    edges = np.array([0, 1, np.iinfo(np.uint64).max], dtype=np.uint64)
    store.publish(edges, np.arange(3 * DIM, dtype=np.float32).reshape(3, DIM))
    with store.read() as table:
        assert table[2**64 - 1][0] == 2 * DIM
        assert table[0][0] == 0
    store.publish(np.empty(0, dtype=np.uint64), np.empty((0, DIM), dtype=np.float32))
    with store.read() as table:
        assert len(table) == 0 and 0 not in table


def test_a_new_table_replaces_the_old_one_whole_even_when_smaller(prefix: str) -> None:
    store, reader = FeatureStore(prefix), FeatureStore(prefix)
    big_keys, big_vectors = _dataset(2_000, seed=1)
    store.publish(big_keys, big_vectors)
    store.publish(big_keys, big_vectors * 2)
    small_keys, small_vectors = _dataset(10, seed=2)
    store.publish(small_keys, small_vectors)  # reuses the file that held the first big table
    with reader.read() as table:
        assert len(table) == len(small_keys)
        assert int(big_keys[0]) not in table
        np.testing.assert_array_equal(table.take(small_keys), small_vectors)


def test_duplicate_keys_are_refused_and_nothing_is_published(prefix: str) -> None:
    store = FeatureStore(prefix)
    published = store.publish([1, 2], np.zeros((2, DIM)))
    with pytest.raises(DuplicateKey, match="key 7"):
        store.publish([7, 8, 7], np.zeros((3, DIM)))
    assert store.version() == published


def test_publishing_fills_the_vectors_in_place(prefix: str) -> None:
    store = FeatureStore(prefix)
    with store.publishing([10, 20, 30], dim=DIM) as values:
        values[:] = np.arange(3, dtype=np.float32)[:, None]
    with store.read() as table:
        assert table[20][0] == 1.0 and table[30][DIM - 1] == 2.0


def test_a_held_table_stays_valid_while_the_writer_publishes_the_next(prefix: str) -> None:
    store, reader = FeatureStore(prefix), FeatureStore(prefix)
    store.publish([1], np.full((1, DIM), 1.0))
    with reader.read() as held:
        store.publish([1], np.full((1, DIM), 2.0))
        with pytest.raises(ReadersStillActive):
            store.publish([1], np.full((1, DIM), 3.0), grace=0.05)
        assert held[1][0] == 1.0
    with reader.read() as table:
        assert table[1][0] == 2.0
