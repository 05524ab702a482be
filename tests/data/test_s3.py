"""Shard sets and tar sets in a real S3-compatible store (SeaweedFS on loopback, uploaded with boto3): read like
the same sets on disk, downloaded once per node into the verified cache, and every refusal of the store (no such
key, wrong or missing credentials, an endpoint that is not there) one error naming the URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddptrain.data.images import ImageLimits
from ddptrain.data.shards import write_shards
from ddptrain.data.sources import Reading, load_split, source_for

from ..conftest import write_synthetic
from ..wds_data import folder_images, write_wds

LIMITS = ImageLimits()


@pytest.fixture(scope="module")
def sets(tmp_path_factory, s3_store):
    folder = write_synthetic(tmp_path_factory.mktemp("img"), classes=3, per_class=8)
    ours = tmp_path_factory.mktemp("ours")
    write_shards(load_split(folder, 0.25, 0), ours, 64 * 1024, 0)
    theirs = write_wds(tmp_path_factory.mktemp("theirs"), "part-%04d.tar", folder_images(folder), maxcount=6)
    return {
        "ours": (ours, s3_store.upload(ours, "data", "ours")),
        "theirs": (theirs, s3_store.upload(theirs, "data", "theirs")),
    }


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DDPTRAIN_SHARD_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _same(remote, local) -> None:
    assert remote.classes == local.classes
    for part in ("train", "val"):
        a, b = getattr(remote, part), getattr(local, part)
        assert a.digest() == b.digest() and len(a) == len(b)
        assert all(a.read(i, LIMITS) == b.read(i, LIMITS) for i in range(len(a)))


def test_a_shard_set_in_s3_reads_like_the_set_on_disk_and_is_downloaded_once(sets, s3_env, cache):
    local, url = sets["ours"]
    assert source_for(url).name == "shard set"
    _same(load_split(url, 0.25, 0), load_split(local, 0.25, 0))
    cached = sorted(p.name for p in cache.glob("*/*.tar"))
    assert len(cached) == len(list(local.glob("*.tar")))
    stamps = [p.stat().st_mtime_ns for p in sorted(cache.glob("*/*.tar"))]
    load_split(url, 0.25, 0).train.read(0, LIMITS)
    assert stamps == [p.stat().st_mtime_ns for p in sorted(cache.glob("*/*.tar"))], "read from the cache"


@pytest.mark.parametrize("form", ["pattern", "prefix"])
def test_a_tar_set_in_s3_by_pattern_or_prefix_reads_like_the_set_on_disk(sets, s3_env, form):
    local, url = sets["theirs"]
    count = len(list(local.glob("*.tar")))
    location = f"{url}part-{{0000..{count - 1:04d}}}.tar" if form == "pattern" else f"wds:{url}"
    reading = Reading(label_key="txt")
    _same(load_split(location, 0.25, 3, reading), load_split(local, 0.25, 3, reading))
