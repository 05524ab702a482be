"""Shard servers and the shard cache, against a real loopback HTTP server that misbehaves (`server.py`): every byte
from the network or the cache is checked before use, every download is bounded in time and size, and what failed a
check is never cached. The index is read within caps and may not point outside its shard set."""

from __future__ import annotations

import fcntl
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from ddptrain.data import remote
from ddptrain.data.images import ImageLimits
from ddptrain.data.remote import Expected, ShardCache, fetch
from ddptrain.data.shards import INDEX, open_shard_set, write_shards
from ddptrain.data.sources import load_split
from ddptrain.errors import DataError

from ..conftest import write_synthetic

LIMITS = ImageLimits()


def _shard_set(folder: Path, out: Path, seed: int = 0, start: int = 0) -> Path:
    write_synthetic(folder, classes=2, per_class=6, seed=seed, start=start)
    write_shards(load_split(folder, 0.25, 0), out, 4 * 1024, 0)
    return out


@pytest.fixture
def served(tmp_path, hostile_server):
    """A shard set of several small shards in the server's folder, and a reader of it through the server."""
    _shard_set(tmp_path / "data", tmp_path / "www")

    def open_remote(deadline_s: float = 30.0):
        return open_shard_set(hostile_server.url, tmp_path / "cache", deadline_s)

    return hostile_server, open_remote


def _first_of(train, shard: int) -> int:
    return int(np.flatnonzero(train.shard == shard)[0])


def _read(train, shard: int = 0) -> bytes:
    return train.read(_first_of(train, shard), LIMITS)


def test_a_trickling_server_fails_the_download_at_the_deadline_naming_the_url(served):
    """The report: a server trickling a byte every 5 s held training for ever (urlopen's timeout is per read)."""
    server, open_remote = served
    _, train, _, _ = open_remote(deadline_s=2.0)
    server.set_trickle(0.5)
    server.modes["train-000000.tar"] = "trickle"
    started = time.monotonic()
    with pytest.raises(DataError, match=r"train-000000\.tar: the download did not finish within --fetch-timeout 2 s"):
        _read(train)
    assert time.monotonic() - started < 6


def test_a_server_that_sends_headers_then_nothing_fails_at_the_deadline(served, monkeypatch):
    server, open_remote = served
    _, train, _, _ = open_remote(deadline_s=2.0)
    server.modes["train-000000.tar"] = "stall"
    started = time.monotonic()
    with pytest.raises(DataError, match="did not finish within --fetch-timeout 2 s"):
        _read(train)
    assert time.monotonic() - started < 6


def test_an_html_page_answered_with_200_is_an_error_naming_url_status_and_type_and_is_never_cached(served, tmp_path):
    server, open_remote = served
    _, train, _, _ = open_remote()
    server.modes["train-000000.tar"] = "html"
    with pytest.raises(
        DataError, match=r"train-000000\.tar: the server answered HTTP 200 with an HTML page \(text/html"
    ):
        _read(train)
    assert not list((tmp_path / "cache").glob("*.tar")) and not list((tmp_path / "cache").glob(".*.part"))
    server.modes.clear()  # the proxy went away: the next read downloads the real shard
    assert _read(train)[:2] == b"\xff\xd8"


def test_an_html_page_instead_of_the_index_is_an_error_naming_it(served):
    server, open_remote = served
    server.modes[INDEX] = "html"
    with pytest.raises(
        DataError, match=r"shard index http://127\.0\.0\.1:\d+/shards\.json: the server answered HTTP 200"
    ):
        open_remote()


def test_a_body_cut_short_is_retried_then_an_error(served, tmp_path, monkeypatch):
    monkeypatch.setattr(remote.time, "sleep", lambda s: None)  # the back-off is not what is tested
    server, open_remote = served
    _, train, _, _ = open_remote()
    server.modes["train-000001.tar"] = "short"
    with pytest.raises(DataError, match=r"train-000001\.tar could not be downloaded after 4 attempts .*IncompleteRead"):
        _read(train, 1)
    assert server.hits["train-000001.tar"] == 4 and not list((tmp_path / "cache").glob("*.tar"))


def test_an_oversize_body_is_cut_off_at_the_recorded_size(served, tmp_path):
    server, open_remote = served
    _, train, _, _ = open_remote()
    server.modes["train-000000.tar"] = "oversize"
    with pytest.raises(DataError, match=r"sent more than the \d+ bytes the index allows"):
        _read(train)
    assert server.hits["train-000000.tar"] == 2  # fetched once more, then refused
    assert not list((tmp_path / "cache").glob("*.tar"))


def test_a_server_failing_once_is_retried_and_then_cached(served):
    server, open_remote = served
    _, train, _, _ = open_remote()
    server.modes["train-000000.tar"] = "fail-once"
    first = _read(train)
    _, again, _, _ = open_remote()
    assert _read(again) == first and server.hits["train-000000.tar"] == 2  # the second reader used the cache


def test_a_redirect_loop_is_refused_at_once(served):
    server, open_remote = served
    _, train, _, _ = open_remote()
    server.modes["train-000000.tar"] = "redirect-loop"
    with pytest.raises(DataError, match=r"redirects in a loop or more than 5 times \(HTTP 302\)"):
        _read(train)
    assert server.hits["train-000000.tar"] <= 6


def test_a_missing_shard_is_one_line_naming_it(served):
    server, open_remote = served
    _, train, _, _ = open_remote()
    server.modes["train-000000.tar"] = "missing"
    with pytest.raises(
        DataError, match=r"shard http://127\.0\.0\.1:\d+/train-000000\.tar is not on the server \(HTTP 404"
    ):
        _read(train)


def test_an_endless_index_is_refused_at_its_cap_without_reading_it_all(served, monkeypatch):
    """The report: an endless shards.json took 1.75 GB in 8 s."""
    server, open_remote = served
    monkeypatch.setattr("ddptrain.data.shards.INDEX_MAX_BYTES", 2 * 2**20)
    server.modes[INDEX] = "endless"
    with pytest.raises(DataError, match=r"shards\.json: the server sent more than the 2097152 bytes"):
        open_remote()


def test_a_shard_set_remade_at_the_same_url_is_never_read_from_the_stale_cache(tmp_path, hostile_server):
    """The report: 11 of 60 samples came back with the old shard's label through the same cache."""
    www = tmp_path / "www"
    _shard_set(tmp_path / "data-a", www, seed=0)
    _, old, _, _ = open_shard_set(hostile_server.url, tmp_path / "cache")
    before = [old.read(i, LIMITS) for i in range(len(old))]
    for item in www.iterdir():
        item.unlink()
    _shard_set(tmp_path / "data-b", www, seed=7, start=100)  # other images, same shard names
    _, new, _, _ = open_shard_set(hostile_server.url, tmp_path / "cache")
    after = [new.read(i, LIMITS) for i in range(len(new))]
    reference = open_shard_set(str(www))[1]
    assert after == [reference.read(i, LIMITS) for i in range(len(reference))]
    assert not set(after) & set(before)


def test_a_cached_shard_changed_on_disk_is_fetched_again(served, tmp_path):
    server, open_remote = served
    _, train, _, _ = open_remote()
    good = _read(train)
    (cached,) = (tmp_path / "cache").glob("*-train-000000.tar")
    damaged = bytearray(cached.read_bytes())
    damaged[600] ^= 0xFF  # bit rot, same size
    cached.write_bytes(bytes(damaged))
    _, again, _, _ = open_remote()
    assert _read(again) == good and server.hits["train-000000.tar"] == 2


def test_the_cache_lock_is_waited_for_at_most_the_deadline(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "LOCK_MARGIN_S", 0.5)
    cache = ShardCache(tmp_path / "cache", keep=4, deadline_s=0.5)
    (tmp_path / "cache").mkdir()
    with open(tmp_path / "cache" / ".x.tar.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another process of the node, stuck in its download
        started = time.monotonic()
        with pytest.raises(DataError, match=r"waited .* s for another process of this node to download"):
            cache.local("http://127.0.0.1:9/x.tar", 10, "0" * 40)
        assert time.monotonic() - started < 4


def test_a_part_file_left_by_a_killed_download_is_removed(served, tmp_path):
    server, open_remote = served
    _, train, _, _ = open_remote()
    (tmp_path / "cache").mkdir(exist_ok=True)
    leftover = tmp_path / "cache" / ".abc-train-000000.tar.999999999.part"  # a pid that does not run
    leftover.write_bytes(b"half")
    _read(train)
    assert not leftover.exists()


def test_credentials_in_a_shard_url_are_sent_as_basic_auth_and_never_printed(served):
    server, open_remote = served
    url = server.url.replace("http://", "http://alice:s3cret@") + "missing.tar"
    with pytest.raises(DataError) as raised:
        fetch(url, Expected(100, what="shard"), 5.0)
    assert "s3cret" not in str(raised.value) and "alice:***@" in str(raised.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda index: index["train"]["shardlist"][0].update(url="../outside.tar"), "points outside the shard set"),
        (lambda index: index["train"]["shardlist"][0].update(url="/etc/passwd"), "points outside the shard set"),
        (lambda index: index["train"]["shardlist"][0].update(url="http://elsewhere/x.tar"), "points outside"),
        (lambda index: index["train"]["shardlist"][0].update(filesize=10), "lies outside its shard"),
        (lambda index: index["classes"].pop(), "label outside the class list"),
        (lambda index: index["train"]["shardlist"][0].pop("sha1"), "without url/nsamples/filesize/sha1"),
        (lambda index: index.update(version=99), "format 99; this ddptrain"),
    ],
)
def test_an_index_that_points_outside_its_set_or_is_inconsistent_is_refused(tmp_path, change, message):
    shards = _shard_set(tmp_path / "data", tmp_path / "shards")
    index = json.loads((shards / INDEX).read_text())
    change(index)
    (shards / INDEX).write_text(json.dumps(index))
    with pytest.raises(DataError, match=message):
        open_shard_set(str(shards))


def test_a_local_shard_changed_after_its_index_was_written_is_refused(tmp_path):
    shards = _shard_set(tmp_path / "data", tmp_path / "shards")
    _, train, _, _ = open_shard_set(str(shards))
    with open(shards / "train-000000.tar", "ab") as handle:
        handle.write(b"\0" * 512)
    with pytest.raises(DataError, match=r"train-000000\.tar is \d+ bytes where its index \(shards\.json\) says"):
        _read(train)


def test_a_shard_set_written_by_an_older_ddptrain_still_reads(tmp_path):
    shards = _shard_set(tmp_path / "data", tmp_path / "shards")
    index = json.loads((shards / INDEX).read_text())
    for key in ("arrays", "seed", "val_split", "layout"):
        index.pop(key)
    index["version"] = 1
    (shards / INDEX).write_text(json.dumps(index))
    classes, train, _, _ = open_shard_set(str(shards))
    assert classes == ["disc", "ring"] and _read(train)[:2] == b"\xff\xd8"
    shutil.rmtree(shards)


def test_a_shard_server_answering_html_for_the_index_is_one_line_before_launch(served, tmp_path):
    from ..conftest import TINY, run_cli

    server, _ = served
    server.modes[INDEX] = "html"
    proc = run_cli(["train", "--data", server.url, "--out", tmp_path / "run", *TINY, "--nproc", 2], check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr[-3000:]
    assert "shards.json: the server answered HTTP 200 with an HTML page" in proc.stderr
    assert not (tmp_path / "run").exists()  # refused before any process started
