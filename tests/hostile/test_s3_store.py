"""A real S3-compatible store (SeaweedFS on loopback) that refuses: no such key or bucket, wrong or missing
credentials, an endpoint that is not there, an object changed after it was indexed — each one error naming the
URL and what to do, within --fetch-timeout."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ddptrain.data.images import ImageLimits
from ddptrain.data.sources import Reading, load_split
from ddptrain.errors import DataError

from ..conftest import write_synthetic
from ..wds_data import folder_images, write_wds

LIMITS = ImageLimits()


@pytest.fixture(scope="module")
def sets(s3_sets):
    return s3_sets


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DDPTRAIN_SHARD_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_missing_object_is_one_error_naming_it(sets, s3_env):
    _, url = sets["theirs"]
    with pytest.raises(DataError, match=r"shard s3://data/theirs/part-0004\.tar is not in the store \(NoSuchKey\)"):
        load_split(f"{url}part-{{0000..0004}}.tar", 0.25, 0)
    with pytest.raises(DataError, match=r"shard index s3://data/nothing/shards\.json is not in the store"):
        load_split("s3://data/nothing/", 0.25, 0)


def test_wrong_or_missing_credentials_are_one_error_saying_what_to_set(sets, s3_env, monkeypatch):
    _, url = sets["ours"]
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(DataError, match=r"s3://data/ours/shards\.json: the store refuses access \(Signature"):
        load_split(url, 0.25, 0)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(DataError, match=r"no AWS credentials were found; set AWS_ACCESS_KEY_ID"):
        load_split(url, 0.25, 0)


def test_an_endpoint_that_is_not_there_fails_within_the_fetch_timeout(s3_env, monkeypatch):
    from ddptrain.runtime.launch import free_port

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    with pytest.raises(DataError, match=r"shard index s3://data/ours/shards\.json could not be downloaded after 4"):
        load_split("s3://data/ours/", 0.25, 0, Reading(fetch_timeout_s=20))
    assert time.monotonic() - started < 20


def test_an_object_changed_after_indexing_is_refused_not_read(sets, s3_env, cache, tmp_path):
    local, _ = sets["theirs"]
    url = s3_env.upload(local, "data", "changing")
    split = load_split(f"wds:{url}", 0.25, 0)
    for stale in cache.glob("*/*-part-*.tar"):
        stale.unlink()  # evicted from the shard cache; the index stays
    other = write_synthetic(tmp_path / "other", classes=3, per_class=8, seed=9)
    s3_env.upload(write_wds(tmp_path / "remade", "part-%04d.tar", folder_images(other), maxcount=6), "data", "changing")
    with pytest.raises(DataError, match=r"is not the one its index lists .*the shard changed on the server after"):
        split.train.read(0, LIMITS)
