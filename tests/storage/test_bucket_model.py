"""A Hypothesis stateful test of a local bucket against a dictionary: any sequence of puts
(plain and only_if_absent), copies, deletes and listings leaves the bucket, its listing and its
notifications as the model says, through a reopen of the deployment."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import conveyor
from conveyor.storage import ObjectExists, ObjectNotFound

KEYS = st.sampled_from(["a", "a/b", "a/c", "b", "é/x", "z z"])
DATA = st.binary(max_size=64)


class BucketModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="conveyor-bucket-model-"))
        self.cv = conveyor.connect(f"sqlite://{self.directory}")
        self.cv.create_queue("events").add_pull_consumer()
        self.bucket = self.cv.create_bucket("model")
        self.bucket.add_notification("events", actions=["object-create", "object-delete"])
        self.objects: dict[str, bytes] = {}
        self.expected_events: list[tuple[str, str]] = []

    def _collides(self, key: str) -> bool:
        """Whether ``key`` would be a file where a stored key needs a directory, or the reverse:
        "a" and "a/b" cannot both be files of one directory, so the model keeps to keys that fit."""
        return any(k != key and (k.startswith(key + "/") or key.startswith(k + "/")) for k in self.objects)

    @rule(key=KEYS, data=DATA)
    def put(self, key: str, data: bytes) -> None:
        if self._collides(key):
            return
        info = self.bucket.put(key, data)
        assert info.sha256 == hashlib.sha256(data).hexdigest()
        self.objects[key] = data
        self.expected_events.append(("PutObject", key))

    @rule(key=KEYS, data=DATA)
    def put_if_absent(self, key: str, data: bytes) -> None:
        if self._collides(key):
            return
        if key in self.objects:
            try:
                self.bucket.put(key, data, only_if_absent=True)
            except ObjectExists:
                return
            raise AssertionError("only_if_absent overwrote an object")
        self.bucket.put(key, data, only_if_absent=True)
        self.objects[key] = data
        self.expected_events.append(("PutObject", key))

    @rule(source=KEYS, destination=KEYS)
    def copy(self, source: str, destination: str) -> None:
        others = [k for k in self.objects if k != destination]
        if source == destination or any(
            k.startswith(destination + "/") or destination.startswith(k + "/") for k in others
        ):
            return
        if source not in self.objects:
            try:
                self.bucket.copy(source, destination)
            except ObjectNotFound:
                return
            raise AssertionError("copied a missing object")
        self.bucket.copy(source, destination)
        self.objects[destination] = self.objects[source]
        self.expected_events.append(("CopyObject", destination))

    @rule(key=KEYS)
    def delete(self, key: str) -> None:
        existed = self.bucket.delete(key)
        assert existed == (key in self.objects)
        if self.objects.pop(key, None) is not None:
            self.expected_events.append(("DeleteObject", key))

    @rule()
    def reopen(self) -> None:
        self.cv.close()
        self.cv = conveyor.connect(f"sqlite://{self.directory}")
        self.bucket = self.cv.bucket("model")

    @invariant()
    def matches_the_model(self) -> None:
        assert [o.key for o in self.bucket.list()] == sorted(self.objects, key=lambda k: k.encode())
        for key, data in self.objects.items():
            assert self.bucket.get(key).bytes() == data

    @invariant()
    def every_write_was_notified_once_in_order(self) -> None:
        q = self.cv.queue("events")
        seen = []
        while batch := q.pull(batch_size=100):
            seen.extend(batch)
            q.ack(acks=[m.lease_id for m in batch])
        bodies = [json.loads(m.body) if isinstance(m.body, str) else m.body for m in seen]
        got = [(b["action"], b["object"]["key"]) for b in bodies]
        assert got == self.expected_events[: len(got)] and len(got) == len(self.expected_events)
        self.expected_events.clear()

    def teardown(self) -> None:
        self.cv.close()
        shutil.rmtree(self.directory, ignore_errors=True)


TestBucketModel = BucketModel.TestCase
TestBucketModel.settings = settings(max_examples=25, stateful_step_count=20, deadline=None)
