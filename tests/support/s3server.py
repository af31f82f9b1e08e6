"""A real S3-compatible server for tests: moto's standalone server on 127.0.0.1.

The tests reach it only through the standard AWS variables (``AWS_ENDPOINT_URL``
and made-up keys), as loadtest would reach a real bucket.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from support.procs import free_port, stop


@contextmanager
def s3_server(*buckets: str) -> Iterator[dict[str, str]]:
    """Start ``moto_server``, create ``buckets``, yield the AWS variables that point at it."""
    port = free_port()
    exe = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto_server did not start")
                time.sleep(0.2)
        env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
        import boto3

        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        for bucket in buckets:
            client.create_bucket(Bucket=bucket)
        yield env
    finally:
        stop(proc)


def client(env: dict[str, str]):
    """A boto3 client for the server: what the tests read back with, rather than with loadtest."""
    import boto3

    return boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def get_bytes(env: dict[str, str], bucket: str, key: str) -> bytes:
    return client(env).get_object(Bucket=bucket, Key=key)["Body"].read()


def keys(env: dict[str, str], bucket: str, prefix: str = "") -> dict[str, int]:
    """Every object under ``prefix`` (key → size)."""
    out: dict[str, int] = {}
    for page in client(env).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            out[obj["Key"]] = obj["Size"]
    return out


def with_env(env: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **env}
