"""WebDataset tar sets that ddptrain did not write (here: written by the `webdataset` package's own ShardWriter):
indexed on first use, split, read by index exactly once per epoch on two processes, and re-indexed when a shard
changes behind the cache."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
import webdataset as wds
from PIL import Image

from ddptrain.data.images import ImageLimits
from ddptrain.data.shards import open_shard_set, write_shards
from ddptrain.data.sources import Reading, all_images, check, load_split, source_for
from ddptrain.data.sources.tarset import expand_braces
from ddptrain.errors import DataError

from ..conftest import write_synthetic
from ..dist_harness import epoch_names, run_ranks
from ..hostile.server import serve
from ..wds_data import folder_images, write_wds


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("folder"), classes=3, per_class=12)


@pytest.fixture(scope="module")
def tarset(folder, tmp_path_factory) -> Path:
    return write_wds(tmp_path_factory.mktemp("wds") / "set", "data-%06d.tar", folder_images(folder))


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DDPTRAIN_SHARD_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_folder_of_foreign_shards_is_a_tar_set_split_like_the_folder(folder, tarset):
    split = load_split(tarset, 0.25, 3, Reading(label_key="txt"))
    by_folder = load_split(folder, 0.25, 3)
    assert source_for(str(tarset)).name == "tar set" and split.classes == by_folder.classes
    assert (len(split.train), len(split.val)) == (27, 9) == (len(by_folder.train), len(by_folder.val))
    names = {Path(split.val.relative(i)).name for i in range(len(split.val))}
    assert names == {Path(by_folder.val.relative(i)).name for i in range(len(by_folder.val))}
    first = split.train.relative(0)
    original = folder / split.classes[split.train.labels[0]] / Path(first).name
    assert split.train.read(0, ImageLimits()) == original.read_bytes()


def test_labels_come_from_the_member_the_label_key_names(tarset):
    assert load_split(tarset, 0.25, 0).classes == ["0", "1", "2"]
    assert load_split(tarset, 0.25, 0, Reading(label_key="json:meta.label")).classes == ["disc", "ring", "star"]
    with pytest.raises(DataError, match=r"no sample of the tar set has an image and a label"):
        load_split(tarset, 0.25, 0, Reading(label_key="json:meta.missing"))
    with pytest.raises(DataError, match=r"--label-key txt:x: give cls, txt, json:PATH"):
        check(str(tarset), Reading(label_key="txt:x"))


def test_a_brace_pattern_names_the_same_shards_as_their_folder(tarset):
    shards = sorted(p.name for p in tarset.glob("*.tar"))
    pattern = str(tarset / f"data-{{000000..{len(shards) - 1:06d}}}.tar")
    assert [Path(p).name for p in expand_braces(pattern)] == shards
    assert load_split(pattern, 0.25, 3).train.digest() == load_split(tarset, 0.25, 3).train.digest()
    assert expand_braces("s3/{a,b}-{1..2}.tar") == ["s3/a-1.tar", "s3/a-2.tar", "s3/b-1.tar", "s3/b-2.tar"]


def test_shards_named_train_and_val_are_the_sets_own_split(folder, tmp_path):
    images = folder_images(folder)
    write_wds(tmp_path / "set", "train-%04d.tar", images[::2])
    write_wds(tmp_path / "set", "val-%04d.tar", images[1::2])
    split = load_split(tmp_path / "set", 0.5, 0)
    assert (len(split.train), len(split.val)) == (18, 18) and split.made_with == {}
    assert len(all_images(str(tmp_path / "set"), split.classes)) == 36


def test_two_processes_read_every_training_sample_of_a_tar_set_once_per_epoch(tarset, cache):
    ranks = run_ranks(epoch_names, 2, str(tarset), 2, str(cache))
    train = load_split(tarset, 0.25, 3).train
    expected = {train.relative(i) for i in range(len(train))}
    for epoch in range(2):
        both = ranks[0][epoch] + ranks[1][epoch]
        assert len(ranks[0][epoch]) == len(ranks[1][epoch]) == len(expected) // 2
        assert len(set(both)) == len(both) and set(both) <= expected and len(expected) - len(both) <= 1
    assert ranks[0][0] != ranks[0][1], "each epoch has its own order"


def test_the_index_is_built_once_and_again_when_a_shard_is_rewritten(folder, tmp_path, cache):
    images = folder_images(folder)
    target = write_wds(tmp_path / "set", "data-%06d.tar", images, maxcount=100)
    before = load_split(target, 0.25, 3)
    assert len(list((cache / "tar-index").glob("*.npz"))) == 1
    load_split(target, 0.25, 3)
    assert len(list((cache / "tar-index").glob("*.npz"))) == 1, "read from the cache"
    relabelled = [(p, name, 2 - number) for p, name, number in images[:24]]  # a re-made set: other labels
    write_wds(tmp_path / "set", "data-%06d.tar", relabelled, maxcount=100)
    after = load_split(target, 0.25, 3)
    assert len(after.train) + len(after.val) == 24 != len(before.train) + len(before.val)
    shard = tmp_path / "set" / "data-000000.tar"
    raw = {}
    with tarfile.open(shard) as tar:
        for member in tar:
            if member.name.endswith(".cls"):
                raw[member.name.split(".")[0]] = int(tar.extractfile(member).read())
    key = Path(after.train.relative(0)).name.split(".")[0]
    assert after.classes[after.train.labels[0]] == str(raw[key])


def test_ddptrain_shard_converts_a_tar_set_into_its_own_shards(tarset, tmp_path):
    split = load_split(tarset, 0.25, 3, Reading(label_key="txt"))
    write_shards(split, tmp_path / "ours", 64 * 1024, 3)
    classes, train, val, _ = open_shard_set(str(tmp_path / "ours"))
    assert classes == split.classes and (len(train), len(val)) == (len(split.train), len(split.val))
    mine = {train.relative(i): train.read(i, ImageLimits()) for i in range(len(train))}
    theirs = {split.train.relative(i): split.train.read(i, ImageLimits()) for i in range(len(split.train))}
    assert mine == theirs


@pytest.fixture
def served(tarset):
    yield from serve(tarset)


def test_a_remote_pattern_downloads_each_shard_once_and_reads_the_same_bytes(tarset, served, cache):
    last = len(list(tarset.glob("*.tar"))) - 1
    url = f"{served.url}data-{{000000..{last:06d}}}.tar"
    remote, local = load_split(url, 0.25, 3), load_split(tarset, 0.25, 3)
    assert remote.train.digest() == local.train.digest()
    assert all(remote.train.read(i, ImageLimits()) == local.train.read(i, ImageLimits()) for i in range(5))
    load_split(url, 0.25, 3)
    assert max(served.hits.values()) == 1, "indexed once; reads come from the cache"


def test_json_labels_may_be_numbers_inside_lists(tmp_path):
    image = io.BytesIO()
    Image.new("RGB", (8, 8)).save(image, format="PNG")
    (tmp_path / "set").mkdir()
    with wds.ShardWriter(str(tmp_path / "set" / "x-%02d.tar"), maxcount=10, verbose=0) as sink:
        for i in range(4):
            sink.write({"__key__": f"k{i}", "png": image.getvalue(), "json": json.dumps({"a": [{"b": i % 2}]})})
    split = load_split(tmp_path / "set", 0.5, 0, Reading(label_key="json:a.0.b"))
    assert split.classes == ["0", "1"] and np.bincount(split.train.labels).tolist() == [1, 1]
