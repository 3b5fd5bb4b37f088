"""A DVC S3 remote on the stack's SeaweedFS: `dvc push` of the pipeline's outputs from one clone, and
`dvc pull` into a newcomer's fresh clone that has no other source of the data."""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from pathlib import Path

import boto3
from stack_tools import dvc, make_clone, run


def tree_digest(root: Path, folders: tuple[str, ...]) -> dict[str, str]:
    """md5 of every file under `folders` of `root`, by relative path."""
    out = {}
    for folder in folders:
        for f in sorted((root / folder).rglob("*")):
            if f.is_file():
                out[str(f.relative_to(root))] = hashlib.md5(f.read_bytes()).hexdigest()
    return out


def without_credentials() -> dict[str, str]:
    """The environment less the stack's S3 keys. botocore must not look for others on the network
    (the cloud instance metadata address): only 127.0.0.1 is ever contacted."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, "AWS_EC2_METADATA_DISABLED": "true"}


def test_push_to_the_s3_remote_and_pull_into_a_fresh_clone(clone, stack, tmp_path):
    endpoint, bucket = stack["OPCOST_STACK_S3_ENDPOINT"], stack["OPCOST_STACK_S3_BUCKET"]
    prefix = f"dvc-{uuid.uuid4().hex[:8]}"  # the bucket outlives one test run
    # The team's remote goes into git; the credentials into .dvc/config.local, which git ignores.
    dvc(clone, "remote", "add", "-d", "team", f"s3://{bucket}/{prefix}")
    dvc(clone, "remote", "modify", "team", "endpointurl", endpoint)
    # a dead S3 fails a push after bounded retries instead of hanging (docs/team.md, "When a team service is down")
    dvc(clone, "remote", "modify", "team", "connect_timeout", "10")
    dvc(clone, "remote", "modify", "team", "read_timeout", "60")
    dvc(clone, "remote", "modify", "--local", "team", "access_key_id", os.environ["AWS_ACCESS_KEY_ID"])
    dvc(clone, "remote", "modify", "--local", "team", "secret_access_key", os.environ["AWS_SECRET_ACCESS_KEY"])
    env = without_credentials()
    pushed = dvc(clone, "push", env=env)
    assert "pushed" in pushed.stdout
    assert "in sync" in dvc(clone, "status", "--cloud", env=env).stdout

    # Every object of the clone's cache is now an object in the bucket, under the same path.
    cache = clone / ".dvc" / "cache"
    local = {str(f.relative_to(cache)) for f in cache.rglob("*") if f.is_file()}
    s3 = boto3.client("s3", endpoint_url=endpoint)
    remote = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/"):
        remote |= {o["Key"][len(prefix) + 1 :] for o in page.get("Contents", [])}
    assert local and remote == local

    secret = os.environ["AWS_SECRET_ACCESS_KEY"]
    assert secret not in (clone / ".dvc" / "config").read_text()
    run(["git", "add", ".dvc/config"], clone)
    run(["git", "commit", "--quiet", "-m", "DVC remote team on S3"], clone)
    status = run(["git", "status", "--porcelain", "--ignored", ".dvc"], clone).stdout
    assert "config.local" in status and status.startswith("!!")  # ignored, never committed

    # A newcomer clones the team's repository; the in-repo remote is gone, so the data can only come from S3.
    newcomer = make_clone(tmp_path / "newcomer", source=clone)
    shutil.rmtree(newcomer / "dvcstore")
    assert not (newcomer / "data" / "evaluated" / "operations.parquet").exists()
    without = dvc(newcomer, "pull", env=env, check=False)
    assert without.returncode != 0  # no credentials: nothing is readable
    dvc(newcomer, "pull", "--allow-missing")  # AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the environment
    folders = ("data", "models")
    theirs, mine = tree_digest(newcomer, folders), tree_digest(clone, folders)
    assert theirs == mine and any(p.startswith("models/") for p in mine)
