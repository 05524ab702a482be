"""Shard sets: what `ddptrain shard` writes, how samples are read back by index, and the epoch order that gives
each rank whole shards while keeping every sample exactly once per epoch."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from ddptrain.data.images import ImageLimits
from ddptrain.data.samplers import EpochSampler, lane_order
from ddptrain.data.shards import open_shard_set, parse_size, write_shards
from ddptrain.data.sources import all_images, load_split
from ddptrain.errors import DataError

from ..conftest import write_synthetic
from ..dist_harness import epoch_names, run_ranks


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("folder"), classes=3, per_class=12)


@pytest.fixture(scope="module")
def shards(folder, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shards")
    write_shards(load_split(folder, 0.25, 0), out, 64 * 1024, 0)
    return out


def test_sizes_are_read_in_powers_of_1024():
    assert parse_size("1GB") == 2**30 and parse_size("500MB") == 500 * 2**20 and parse_size("64k") == 65536
    assert parse_size("1000") == 1000
    with pytest.raises(ValueError, match="not a size"):
        parse_size("big")


def test_a_shard_set_holds_the_folders_split_with_the_same_bytes_and_labels(folder, shards):
    split = load_split(folder, 0.25, 0)
    classes, train, val, _ = open_shard_set(str(shards))
    assert classes == split.classes
    assert len(train.shard_sizes) > 1, "the size limit should give several training shards"
    for part, original in ((train, split.train), (val, split.val)):
        by_name = {original.relative(i): i for i in range(len(original))}
        assert sorted(part.relative(i) for i in range(len(part))) == sorted(by_name)
        for i in range(len(part)):
            j = by_name[part.relative(i)]
            assert part.labels[i] == original.labels[j]
            assert part.read(i, ImageLimits()) == Path(original.path(j)).read_bytes()


def test_a_shard_set_has_no_split_all_to_evaluate(shards):
    with pytest.raises(DataError, match="is a shard set: its images are split into train and val parts for good"):
        all_images(shards, ["disc", "ring", "star"])


def test_webdataset_reads_the_shards_as_written(shards):
    import webdataset as wds  # a dev dependency

    _, train, _, _ = open_shard_set(str(shards))
    urls = [str(shards / s["url"]) for s in train.shards]
    samples = list(wds.WebDataset(urls, shardshuffle=False))
    assert len(samples) == len(train)
    for i, sample in enumerate(samples):
        image = next(v for k, v in sample.items() if k in ("jpg", "jpeg", "png"))
        assert image == train.read(i, ImageLimits()) and int(sample["cls"]) == train.labels[i]


def test_timms_webdataset_reader_reads_both_parts_with_their_labels(shards):
    import timm.data as timm_data  # a dependency of ddptrain

    _, train, val, _ = open_shard_set(str(shards))
    for split, part in (("train", train), ("val", val)):
        dataset = timm_data.create_dataset("wds/shapes", root=str(shards), split=split, batch_size=1, seed=0)
        labels = sorted(int(target) for _, target in dataset)
        assert labels == sorted(part.labels.tolist())


def test_an_epoch_gives_each_rank_a_run_of_whole_shards_and_every_sample_once():
    sizes = [7, 9, 8, 8, 10, 6, 9, 7]
    order = lane_order(sizes, torch.Generator().manual_seed(3), lanes=2)
    assert sorted(order) == list(range(sum(sizes)))
    shard_of = np.repeat(np.arange(len(sizes)), sizes)
    for rank in range(2):
        touched = set(shard_of[order[rank::2]].tolist())
        assert len(touched) <= len(sizes) // 2 + 1, (rank, touched)  # its half of the shards (one shared at the cut)
    assert lane_order(sizes, torch.Generator().manual_seed(4), 2) != order


def test_a_resume_on_three_processes_of_an_epoch_laid_out_for_two_neither_repeats_nor_skips():
    sizes = [5, 6, 7, 5, 6]
    total = sum(sizes)
    two = [EpochSampler(total, r, 2, seed=1, shard_sizes=sizes) for r in range(2)]
    for sampler in two:
        sampler.set_epoch(2)
    first = [list(s)[:4] for s in two]  # 8 positions consumed
    three = [EpochSampler(total, r, 3, seed=1, shard_sizes=sizes) for r in range(3)]
    for sampler in three:
        sampler.set_epoch(2, start=8, lanes=2)
    rest = [item for s in three for item in s]
    seen = [index for index, _, _ in [*first[0], *first[1], *rest]]
    assert len(seen) == len(set(seen)) >= total - 2


def test_two_processes_read_every_training_image_of_the_folder_once_per_epoch(folder, shards):
    ranks = run_ranks(epoch_names, 2, str(shards), 2)
    train = load_split(folder, 0.25, 0).train
    expected = {train.relative(i) for i in range(len(train))}
    for epoch in range(2):
        both = ranks[0][epoch] + ranks[1][epoch]
        assert len(ranks[0][epoch]) == len(ranks[1][epoch]) == len(expected) // 2
        assert len(set(both)) == len(both) == len(expected) // 2 * 2 and set(both) <= expected
    assert ranks[0][0] != ranks[0][1], "each epoch has its own order"


class _Server(http.server.SimpleHTTPRequestHandler):
    failures: dict = {}

    def do_GET(self):  # noqa: N802 (http.server's name)
        name = self.path.rsplit("/", 1)[-1]
        if self.failures.get(name, 0) > 0:
            self.failures[name] -= 1
            self.send_error(503, "injected failure")
            return
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture()
def server(shards):
    handler = type("Handler", (_Server,), {"failures": {}})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=str(shards)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", handler
    httpd.shutdown()


def test_a_remote_shard_that_fails_once_is_retried_and_cached(server, shards, tmp_path):
    url, handler = server
    handler.failures["train-000000.tar"] = 1
    _, train, _, _ = open_shard_set(url, cache_dir=tmp_path / "cache")
    first = int(np.flatnonzero(train.shard == 0)[0])
    assert train.read(first, ImageLimits()) == open_shard_set(str(shards))[1].read(first, ImageLimits())
    cached = list((tmp_path / "cache").glob("*-train-000000.tar"))
    assert len(cached) == 1 and handler.failures["train-000000.tar"] == 0


def test_a_missing_remote_shard_is_an_error_naming_it(server, shards, tmp_path):
    url, _ = server
    _, train, _, _ = open_shard_set(url, cache_dir=tmp_path / "cache")
    (shards / "train-000001.tar").rename(tmp_path / "away.tar")
    try:
        with pytest.raises(DataError, match=r"shard http://127\.0\.0\.1:\d+/train-000001\.tar is not on the server"):
            train.read(int(np.flatnonzero(train.shard == 1)[0]), ImageLimits())
    finally:
        (tmp_path / "away.tar").rename(shards / "train-000001.tar")


def test_validation_images_that_are_copies_of_training_images_are_named(tmp_path, caplog):
    """A file copied into val/ under another name is a training image that validation scores as unseen: `shard`
    reads every byte anyway, and now says which ones are copies (the shards are written as they were)."""
    import logging

    from ddptrain.tools.shard import make_shards

    data = tmp_path / "data"
    for part, start in (("train", 0), ("val", 100)):
        write_synthetic(data / part, classes=2, per_class=4, start=start)
    copied = sorted((data / "train" / "ring").glob("*.jpg"))[1]
    (data / "val" / "ring" / "again.jpg").write_bytes(copied.read_bytes())
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        summary = make_shards(str(data), str(tmp_path / "shards"), "1MB", 0.2, 0, False)
    said = [r.getMessage() for r in caplog.records if "byte-for-byte" in r.getMessage()]
    assert said == [
        f"1 image of the validation part is byte-for-byte a training image (val/ring/again.jpg = "
        f"train/ring/{copied.name}, in {data}): validation scores it as unseen; remove one copy of each and shard again"
    ]
    assert summary["val"]["samples"] == 9  # written as it is: the same split as training from the folder

    caplog.clear()
    (data / "val" / "ring" / "again.jpg").unlink()
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        make_shards(str(data), str(tmp_path / "clean"), "1MB", 0.2, 0, False)
    assert "byte-for-byte" not in caplog.text
