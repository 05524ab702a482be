"""Copies of one picture on both sides of the split (`x.jpg` and `x (1).jpg`, a picture saved into two classes):
the validation copy would be scored on a picture the model trained on. A split ddptrain makes moves it to training
and says so; a split the data gives is left as the user made it and the copies are said with the fix."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

from ddptrain.data.copies import copies_across
from ddptrain.data.index import SampleIndex
from ddptrain.data.sources import load_split
from ddptrain.data.split import without_copies

from ..conftest import run_cli, write_synthetic


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _with_copies(root: Path) -> Path:
    """3 classes x 12 pictures, each also saved as 'NAME (1).jpg' in its class, and one saved into another class."""
    write_synthetic(root, classes=3, per_class=12)
    for picture in sorted(root.glob("*/*.jpg")):
        shutil.copyfile(picture, picture.with_name(f"{picture.stem} (1).jpg"))
    classes = sorted(p.name for p in root.iterdir())
    shutil.copyfile(next((root / classes[0]).glob("*_0000.jpg")), root / classes[1] / "misfiled.jpg")
    return root


def test_validation_copies_of_training_pictures_are_moved_to_training_and_said(tmp_path, caplog):
    data = _with_copies(tmp_path / "data")
    listed = load_split(data, 0.25, 0)
    assert copies_across(listed.train, listed.val)  # the split ddptrain made put copies on both sides
    total = len(listed.train) + len(listed.val)
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        split = without_copies(listed)
    trained = {_digest(path) for path, _ in split.train}
    assert not [path for path, _ in split.val if _digest(path) in trained]
    assert len(split.train) + len(split.val) == total  # moved, not dropped
    said = [r.getMessage() for r in caplog.records if "byte-identical" in r.getMessage()]
    assert len(said) == 1 and "moved to training" in said[0] and f"validation holds {len(split.val)} images" in said[0]
    assert str(data) in said[0] and " = " in said[0]


def test_a_split_the_data_gives_is_kept_and_its_copies_are_said_with_the_fix(tmp_path, caplog):
    data = tmp_path / "data"
    write_synthetic(data / "train", classes=2, per_class=6)
    write_synthetic(data / "val", classes=2, per_class=3, start=6)
    picture = next((data / "train").glob("*/*_0001.jpg"))
    shutil.copyfile(picture, data / "val" / picture.parent.name / "again.jpg")
    listed = load_split(data, 0.2, 0)
    before = (list(listed.train), list(listed.val))
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        split = without_copies(listed)
    assert (list(split.train), list(split.val)) == before
    said = [r.getMessage() for r in caplog.records if "byte-identical" in r.getMessage()]
    assert (
        len(said) == 1 and "1 validation images" in said[0] and "remove the copies from the validation part" in said[0]
    )


def test_files_of_one_size_and_one_header_but_other_bytes_are_not_copies(tmp_path):
    head = b"\xff\xd8" + b"h" * 5000  # the same first 4 KiB
    (tmp_path / "a.jpg").write_bytes(head + b"a" * 100)
    (tmp_path / "b.jpg").write_bytes(head + b"b" * 100)
    (tmp_path / "c.jpg").write_bytes(head + b"a" * 100)
    train = SampleIndex.from_pairs(tmp_path, [(str(tmp_path / "a.jpg"), 0)])
    val = SampleIndex.from_pairs(tmp_path, [(str(tmp_path / "b.jpg"), 0), (str(tmp_path / "c.jpg"), 1)])
    assert copies_across(train, val) == {1: 0}
    assert copies_across(train, val, budget=3 * 5000) is None  # whole files past the budget: not compared


def test_a_split_too_costly_to_compare_is_kept_and_said(tmp_path, caplog, monkeypatch):
    """Uncompressed scans of one size whose first rows are black agree in size and first 4 KiB: comparing them
    whole would read the data set; past the budget the split is kept as made and the skipped check is said."""
    data = _with_copies(tmp_path / "data")
    monkeypatch.setattr("ddptrain.data.copies.MAX_COMPARED_BYTES", 1000)
    listed = load_split(data, 0.25, 0)
    before = (list(listed.train), list(listed.val))
    with caplog.at_level(logging.INFO, logger="ddptrain"):
        split = without_copies(listed)
    assert (list(split.train), list(split.val)) == before
    assert "not checked for copies of training images in validation" in caplog.text


def test_a_run_scores_no_copy_of_a_training_picture(tmp_path):
    data = _with_copies(tmp_path / "data")
    common = ["--img-size", 32, "--batch-size", 4, "--epochs", 1, "--workers", 0, "--nproc", 2, "--val-split", 0.25]
    run = run_cli(["train", "--data", data, "--out", tmp_path / "run", "--model", "timm:test_resnet", *common])
    assert "byte-identical copies of training images" in run.stderr and "moved to training" in run.stderr
    rows = {}
    for part in ("train", "val"):
        lines = (tmp_path / "run" / "splits" / f"{part}.txt").read_text().splitlines()
        rows[part] = [line.split("\t")[0] for line in lines if not line.startswith("#")]
    trained = {_digest(data / name) for name in rows["train"]}
    assert rows["val"] and not [name for name in rows["val"] if _digest(data / name) in trained]
    # a checkpoint away from its run folder: eval makes the split again from the data, the same one
    away = tmp_path / "away" / "checkpoints"
    away.mkdir(parents=True)
    shutil.copyfile(tmp_path / "run" / "checkpoints" / "best.pt", away / "best.pt")
    scored = run_cli(["eval", "--checkpoint", away / "best.pt", "--data", data])
    assert json.loads(scored.stdout.strip().splitlines()[-1])["samples"] == len(rows["val"])


def test_shard_moves_the_copies_of_a_split_it_makes_as_train_does(tmp_path, caplog):
    from ddptrain.tools.shard import make_shards

    data = _with_copies(tmp_path / "data")
    listed = load_split(data, 0.25, 0)
    moved = len(copies_across(listed.train, listed.val))
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        summary = make_shards(str(data), str(tmp_path / "shards"), "1MB", 0.25, 0, False)
    assert summary["val"]["samples"] == len(listed.val) - moved
    assert summary["train"]["samples"] == len(listed.train) + moved
    said = [r.getMessage() for r in caplog.records if "byte-" in r.getMessage()]
    assert len(said) == 1 and "moved to training" in said[0]  # not also the shard writer's "remove one copy"


def test_fifos_and_empty_files_named_like_pictures_are_never_waited_on(tmp_path):
    """A FIFO's size reads 0, as an empty file's does: opened to compare, it would block for ever."""
    import os
    import threading

    from ddptrain.data.copies import _open_regular

    os.mkfifo(tmp_path / "pipe.jpg")
    os.mkfifo(tmp_path / "other_pipe.jpg")
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "empty_too.jpg").write_bytes(b"")
    train = SampleIndex.from_pairs(tmp_path, [(str(tmp_path / n), 0) for n in ("pipe.jpg", "empty.jpg")])
    val = SampleIndex.from_pairs(tmp_path, [(str(tmp_path / n), 0) for n in ("other_pipe.jpg", "empty_too.jpg")])
    found = []
    worker = threading.Thread(target=lambda: found.append(copies_across(train, val)), daemon=True)
    worker.start()
    worker.join(10)
    assert found == [{1: 1}]  # the two empty files are copies; the FIFOs are not read
    assert _open_regular(str(tmp_path / "pipe.jpg")) is None  # a file that became a FIFO after its stat


def test_a_folder_of_copies_only_trains_without_validation_and_says_why(tmp_path, caplog):
    data = tmp_path / "data"
    write_synthetic(data, classes=2, per_class=1)
    for picture in sorted(data.glob("*/*.jpg")):
        for n in range(1, 5):
            shutil.copyfile(picture, picture.with_name(f"{picture.stem} ({n}).jpg"))
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        split = without_copies(load_split(data, 0.25, 0))
    assert len(split.val) == 0 and len(split.train) == 10
    assert "the run trains without validation (every validation image had a copy)" in caplog.text
