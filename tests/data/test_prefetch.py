"""Remote shards fetched ahead: while a rank reads a shard, the next `ahead` shards of its own order are downloaded
into the node cache — never more, each once, and without changing a single index of the epoch."""

from __future__ import annotations

import time

import pytest

from ddptrain.data.images import ImageLimits
from ddptrain.data.prefetch import Prefetcher
from ddptrain.data.samplers import EpochSampler
from ddptrain.data.shards import open_shard_set, write_shards
from ddptrain.data.sources import load_split

from ..conftest import write_synthetic
from ..hostile.server import serve


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = write_synthetic(tmp_path_factory.mktemp("img"), classes=2, per_class=12)
    shards = tmp_path_factory.mktemp("shards")
    write_shards(load_split(folder, 0.0, 0), shards, 8 * 1024, 0)
    yield from serve(shards)


def _wait_for(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_the_next_shards_of_the_ranks_order_are_fetched_ahead_and_no_further(served, tmp_path, monkeypatch):
    monkeypatch.setenv("DDPTRAIN_SHARD_CACHE_SHARDS", "64")  # the whole set fits: a second download is a bug
    _, train, _, _ = open_shard_set(served.url, cache_dir=tmp_path / "cache")
    assert len(train.shards) >= 6
    sampler = EpochSampler(len(train), 0, 1, seed=0, shard_sizes=train.shard_sizes)
    plain = list(sampler)
    sampler.prefetcher = Prefetcher(train, ahead=2)
    items = iter(sampler)
    first = next(items)
    order = []
    for index, _, _ in plain:
        shard = train.shards[int(train.shard[index])]["url"]
        if shard not in order:
            order.append(shard)
    _wait_for(lambda: sum(served.hits[name] for name in order[:3]) == 3)
    time.sleep(0.3)
    assert {name for name, n in served.hits.items() if n and name.endswith(".tar")} == set(order[:3])
    rest = list(items)
    assert [first, *rest] == plain, "the epoch's indices are the same with prefetch"
    for index, _, _ in plain:  # what the loader's workers read: from the cache, not downloaded again
        train.read(index, ImageLimits())
    assert all(served.hits[name] == 1 for name in order), "each shard downloaded once"


def test_a_failed_prefetch_is_left_to_the_reader_who_reports_it(served, tmp_path):
    _, train, _, _ = open_shard_set(served.url, cache_dir=tmp_path / "cache")
    sampler = EpochSampler(len(train), 0, 1, seed=1, shard_sizes=train.shard_sizes)
    plain = list(sampler)
    second = next(
        train.shards[int(train.shard[i])]["url"] for i, _, _ in plain if train.shard[i] != train.shard[plain[0][0]]
    )
    served.modes[second] = "missing"
    try:
        sampler.prefetcher = Prefetcher(train, ahead=2)
        assert list(sampler) == plain
        _wait_for(lambda: served.hits[second] >= 1)
        with pytest.raises(Exception, match=rf"shard .*{second} is not on the server"):
            train.read(
                next(i for i, _, _ in plain if train.shards[int(train.shard[i])]["url"] == second), ImageLimits()
            )
    finally:
        served.modes.pop(second)
