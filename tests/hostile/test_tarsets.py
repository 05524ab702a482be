"""Tar sets that ddptrain did not write, against hostile members, labels, files and servers: a bad sample is left
out and counted, a bad shard or server is one error naming it, a shard changed behind the index cache is indexed
again (local) or refused (remote), and nothing is ever written outside the cache."""

from __future__ import annotations

import io
import json
import logging
import tarfile
from pathlib import Path

import pytest

from ddptrain.data.images import ImageLimits
from ddptrain.data.sources import Reading, check, load_split
from ddptrain.errors import DataError

from ..conftest import write_synthetic
from ..wds_data import folder_images, write_wds


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, link: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.size, info.type, info.linkname = len(data), kind, link
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DDPTRAIN_SHARD_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def jpeg(tmp_path) -> bytes:
    folder = write_synthetic(tmp_path / "img", classes=1, per_class=1)
    return next(folder.glob("*/*.jpg")).read_bytes()


def test_bad_members_are_left_out_and_counted(tmp_path, jpeg, caplog):
    (tmp_path / "set").mkdir()
    with tarfile.open(tmp_path / "set" / "x.tar", "w") as tar:
        for key, label in (("good1", b"0"), ("good2", b"1"), ("good3", b"1")):
            _add(tar, f"{key}.jpg", jpeg)
            _add(tar, f"{key}.cls", label)
        _add(tar, "nolabel.jpg", jpeg)
        _add(tar, "noimage.cls", b"1")
        _add(tar, "emptylabel.jpg", jpeg)
        _add(tar, "emptylabel.cls", b"  ")
        _add(tar, "linked.jpg", kind=tarfile.SYMTYPE, link="/etc/passwd")
        _add(tar, "linked.cls", b"0")
        _add(tar, "../../escape.jpg", jpeg)  # a name is only a name: nothing is ever extracted
        _add(tar, "../../escape.cls", b"0")
        _add(tar, "folder", kind=tarfile.DIRTYPE)
        _add(tar, "good1.jpg", jpeg)  # the key again, later in the shard
        _add(tar, "good1.cls", b"1")
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        split = load_split(tmp_path / "set", 0.0, 0)
    names = sorted(split.train.relative(i) for i in range(len(split.train)))
    assert names == ["x.tar/../../escape.jpg", "x.tar/good1.jpg", "x.tar/good2.jpg", "x.tar/good3.jpg"]
    assert split.train.read(0, ImageLimits()) == jpeg
    said = caplog.text
    assert "1 sample left out: a key repeated in the shard (x.tar/good1)" in said
    assert "2 samples left out: no image member" in said and "2 samples left out: no label (cls)" in said
    assert not (tmp_path / "escape.jpg").exists()


@pytest.mark.parametrize("damage", ["cut", "noise", "empty"])
def test_a_shard_that_is_not_a_whole_tar_is_one_error_naming_it(tmp_path, damage):
    images = folder_images(write_synthetic(tmp_path / "img", classes=2, per_class=4))
    write_wds(tmp_path / "set", "d-%02d.tar", images, maxcount=100)
    shard = tmp_path / "set" / "d-00.tar"
    data = shard.read_bytes()
    shard.write_bytes({"cut": data[: len(data) // 2 + 700], "noise": b"\x8f" * 4096, "empty": b""}[damage])
    with pytest.raises(DataError, match=rf"shard {shard} is not a readable tar file .*; re-make or re-download it"):
        load_split(tmp_path / "set", 0.25, 0)


def test_labels_that_are_not_labels_leave_their_samples_out(tmp_path, jpeg):
    (tmp_path / "set").mkdir()
    labels = [{"y": 1}, {"y": "01"}, {"y": "+1"}, {"y": 2}, {"y": None}, {"y": True}, {"y": {"z": 1}}, "not json"]
    with tarfile.open(tmp_path / "set" / "x.tar", "w") as tar:
        for i, label in enumerate(labels):
            _add(tar, f"k{i}.jpg", jpeg)
            _add(tar, f"k{i}.json", label.encode() if isinstance(label, str) else json.dumps(label).encode())
    split = load_split(tmp_path / "set", 0.0, 0, Reading(label_key="json:y"))
    assert split.classes == ["1", "2"] and sorted(split.train.labels.tolist()) == [0, 0, 0, 1]


def test_a_pattern_naming_a_missing_shard_is_refused_before_launch(tmp_path):
    images = folder_images(write_synthetic(tmp_path / "img", classes=2, per_class=4))
    write_wds(tmp_path / "set", "d-%02d.tar", images, maxcount=4)
    with pytest.raises(DataError, match=r"shard .*/set/d-02\.tar does not exist"):
        check(str(tmp_path / "set" / "d-{00..02}.tar"))
    with pytest.raises(DataError, match=r"neither a range"):
        check(str(tmp_path / "set" / "d-{00-02}.tar"))


@pytest.fixture
def served(tmp_path, hostile_server):
    images = folder_images(write_synthetic(tmp_path / "img", classes=2, per_class=6))
    write_wds(tmp_path / "www", "d-%02d.tar", images, maxcount=4)
    return hostile_server, f"{hostile_server.url}d-{{00..02}}.tar"


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("missing", r"shard http://127\.0\.0\.1:\d+/d-01\.tar is not on the server \(HTTP 404"),
        ("html", r"shard http://127\.0\.0\.1:\d+/d-01\.tar: the server answered HTTP 200 with an HTML page"),
        ("redirect-loop", r"redirects in a loop"),
    ],
)
def test_a_server_that_misbehaves_while_indexing_is_one_error_naming_the_shard(served, mode, said, cache):
    server, url = served
    server.modes["d-01.tar"] = mode
    with pytest.raises(DataError, match=said):
        load_split(url, 0.25, 0)
    assert not list((cache / "tar-index").glob("*.npz"))[1:], "only the shard before it was indexed"


def test_a_trickling_server_fails_indexing_at_the_fetch_timeout(served):
    server, url = served
    server.modes["d-00.tar"] = "trickle"
    server.set_trickle(0.5)
    with pytest.raises(DataError, match=r"did not finish within --fetch-timeout 2 s"):
        load_split(url, 0.25, 0, Reading(fetch_timeout_s=2))


def test_a_remote_shard_changed_after_indexing_is_refused_not_read(served, tmp_path, cache):
    server, url = served
    split = load_split(url, 0.25, 0)
    for stale in cache.glob("*/*-d-0*.tar"):
        stale.unlink()  # evicted from the shard cache; the index stays
    www = Path(server.handler.folder)
    images = folder_images(write_synthetic(tmp_path / "other", classes=2, per_class=6, seed=5))
    write_wds(www, "d-%02d.tar", images, maxcount=4)  # re-made on the server under the same names
    with pytest.raises(DataError, match=r"is not the one its index lists .*; the shard changed on the server after"):
        split.train.read(0, ImageLimits())


def test_a_label_key_the_samples_lack_is_refused_before_launch_naming_what_they_hold(tmp_path):
    images = folder_images(write_synthetic(tmp_path / "img", classes=2, per_class=4))
    write_wds(tmp_path / "set", "d-%02d.tar", images, maxcount=4)
    with pytest.raises(DataError, match=r"--label-key png\); its samples hold: cls, jpg, json, txt; give --label-key"):
        check(str(tmp_path / "set"), Reading(label_key="png"))
    check(str(tmp_path / "set"), Reading(label_key="png", known=False))  # eval: the checkpoint's key is not read yet


def test_a_tar_of_image_folders_and_a_zipped_folder_are_refused_naming_the_fix(tmp_path, caplog):
    """`tar cf data.tar data/` of a class-folder dataset was refused for a --label-key among 'gif, jpeg, jpg', after
    a warning that every sample had no label; a .zip or .tar.gz 'does not exist or is not a folder'."""
    import shutil
    import subprocess
    import sys

    from ..conftest import cli_env

    data = write_synthetic(tmp_path / "data", classes=2, per_class=3)
    with tarfile.open(tmp_path / "data.tar", "w") as tar:
        tar.add(data, arcname="data")
    with caplog.at_level(logging.WARNING, logger="ddptrain"), pytest.raises(DataError) as refused:
        check(str(tmp_path / "data.tar"), Reading())
    assert str(refused.value).startswith(
        f"--data {tmp_path / 'data.tar'}: a tar of image folders (e.g. data/disc/disc_0000), not a tar set"
    )
    assert caplog.records == []  # no warning about each of its samples first
    zipped = shutil.make_archive(str(tmp_path / "data"), "zip", tmp_path, "data")
    proc = subprocess.run(
        [sys.executable, "-m", "ddptrain", "train", "--data", zipped, "--out", tmp_path / "run"],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=60,
    )
    assert proc.stderr.strip().endswith(
        f"--data {zipped} is a zip archive: unpack it (unzip data.zip) and give the folder it makes"
    )
