"""Shard sets and tar sets in a real S3-compatible store (SeaweedFS on loopback, uploaded with boto3): read like
the same sets on disk, downloaded once per node into the verified cache, and every refusal of the store (no such
key, wrong or missing credentials, an endpoint that is not there) one error naming the URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddptrain.data.images import ImageLimits
from ddptrain.data.sources import Reading, load_split, source_for

from ..conftest import write_synthetic
from ..dist_harness import epoch_names, run_ranks

LIMITS = ImageLimits()


@pytest.fixture(scope="module")
def sets(s3_sets):
    return s3_sets


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


def test_two_processes_read_every_training_sample_of_an_s3_shard_set_once_per_epoch(sets, s3_env, cache):
    local, url = sets["ours"]
    ranks = run_ranks(epoch_names, 2, url, 2, str(cache))
    train = load_split(local, 0.25, 0).train
    expected = {train.relative(i) for i in range(len(train))}
    for epoch in range(2):
        both = ranks[0][epoch] + ranks[1][epoch]
        assert len(set(both)) == len(both) == len(expected) // 2 * 2 and set(both) <= expected
    assert ranks[0][0] != ranks[0][1]


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_manifest_of_s3_objects_reads_each_image_from_the_store(tmp_path, s3_env, kind):
    folder = write_synthetic(tmp_path / "img", classes=2, per_class=4)
    images = sorted(folder.glob("*/*.jpg"))
    client = s3_env.client()
    client.create_bucket(Bucket="photos") if "photos" not in [
        b["Name"] for b in client.list_buckets()["Buckets"]
    ] else None
    rows = []
    for image in images:
        client.upload_file(str(image), "photos", f"{kind}/{image.parent.name}/{image.name}")
        rows.append((f"s3://photos/{kind}/{image.parent.name}/{image.name}", image.parent.name))
    rows.append(("s3://photos/nothing/here.jpg", images[0].parent.name))
    manifest = tmp_path / f"list.{kind}"
    if kind == "csv":
        manifest.write_text("path,label\n" + "".join(f"{p},{label}\n" for p, label in rows))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"path": [r[0] for r in rows], "label": [r[1] for r in rows]}), manifest)
    split = load_split(manifest, 0.0, 0)
    by_url = {split.train.path(i): i for i in range(len(split.train))}
    assert len(by_url) == 9
    for image in images:
        url = f"s3://photos/{kind}/{image.parent.name}/{image.name}"
        assert split.train.read(by_url[url], LIMITS) == image.read_bytes()
    with pytest.raises(OSError, match=r"image s3://photos/nothing/here\.jpg is not in the store"):
        split.train.read(by_url["s3://photos/nothing/here.jpg"], LIMITS)
