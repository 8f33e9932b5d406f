"""A real S3-compatible server for the storage tests: ``moto_server`` as a subprocess on a free
port of 127.0.0.1, with its authentication switched on (by default moto accepts any key), so a
wrong key is refused as a real service refuses it. moto keeps its data in memory."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import boto3

# moto authenticates every request after this many: the IAM calls that make the test user.
SETUP_ACTIONS = 3
POLICY = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


@dataclass
class S3Server:
    endpoint: str
    access_key_id: str
    secret_access_key: str = field(repr=False)
    process: subprocess.Popen[bytes] = field(repr=False)

    def client(self) -> object:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
        )

    def new_bucket(self) -> str:
        """A fresh bucket on the server; its name."""
        name = f"t-{uuid.uuid4().hex[:20]}"
        self.client().create_bucket(Bucket=name)  # type: ignore[attr-defined]
        return name

    def keys(self, bucket: str) -> list[str]:
        listing = self.client().list_objects_v2(Bucket=bucket)  # type: ignore[attr-defined]
        return [item["Key"] for item in listing.get("Contents", [])]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # a loaded machine: moto did not finish its shutdown in time
            self.process.kill()
            self.process.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_s3_server(logs: Path) -> S3Server:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT=str(SETUP_ACTIONS))
    moto = Path(sys.executable).with_name("moto_server")
    with (logs / "moto.log").open("wb") as output:
        process = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(port)], env=env, stdout=output, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto_server did not start; see {logs / 'moto.log'}") from None
            time.sleep(0.05)
    iam = boto3.client(
        "iam", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup"
    )
    iam.create_user(UserName="conveyor")
    iam.put_user_policy(UserName="conveyor", PolicyName="s3", PolicyDocument=json.dumps(POLICY))
    key = iam.create_access_key(UserName="conveyor")["AccessKey"]
    return S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"], process)
