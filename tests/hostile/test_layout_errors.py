"""What a new user hits without knowing: data-layout errors before launch (and before torch is imported), an error
met in DataLoader workers as one line naming the source, advice to resume only when there is something to resume,
`--val-split 0` as an explicit training-only mode, and `shard`/`train`/`eval` that agree on the split."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys

import pytest

from ddptrain.cli import build_parser
from ddptrain.config import Config

from ..conftest import TINY, cli_env, json_lines, read_metrics, run_cli, write_synthetic
from ..test_cli import BLOCKER


@pytest.fixture
def no_torch(tmp_path):
    folder = tmp_path / "blocker"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(BLOCKER)
    return cli_env({"PYTHONPATH": str(folder)})


def _train(data, out, env, *extra):
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", data, "--out", out, *TINY, "--nproc", 2, *extra]
    return subprocess.run(list(map(str, cmd)), capture_output=True, text=True, env=env, timeout=60)


def _layouts(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    one = write_synthetic(tmp_path / "one", classes=1, per_class=3)
    hollow = write_synthetic(tmp_path / "hollow", classes=2, per_class=3)
    (hollow / "star").mkdir()
    (hollow / "star" / "notes.txt").write_text("no images here")
    manifest = tmp_path / "list.csv"
    with open(manifest, "w", newline="") as handle:
        csv.writer(handle).writerows([("path", "label"), *((f"images/{i}.jpg", i % 2) for i in range(30))])
    unpacked = tmp_path / "unpacked"  # an archive unpacked into a folder of its own name
    inner = write_synthetic(unpacked / "shapes", classes=2, per_class=3)
    by_split = tmp_path / "by_split"  # train/ and test/, no val/: once trained as two classes named train and test
    for part in ("train", "test"):
        write_synthetic(by_split / part, classes=2, per_class=3)
    a_class = write_synthetic(tmp_path / "classes", classes=2, per_class=3) / "disc"  # one class given as the data
    flat = tmp_path / "flat" / "train"  # a Hugging Face imagefolder: images and their labels in metadata.jsonl
    flat.mkdir(parents=True)
    (flat / "0.jpg").write_bytes((a_class / "disc_0000.jpg").read_bytes())
    (flat / "metadata.jsonl").write_text('{"file_name": "0.jpg", "label": "disc"}\n')
    listed = tmp_path / "train.txt"  # mmpretrain's and Caffe's list of images
    listed.write_text("disc/0.jpg 0\nring/0.jpg 1\n")
    return {
        f"it holds 3 images itself, as one class's folder does: give the folder above it, which holds one folder per "
        f"class: --data {a_class.parent}\n": a_class,
        f"has no class sub-folders; expected {flat}/<class name>/<images>; it holds metadata.jsonl: to read the labels "
        f"it lists, give --data {flat / 'metadata.jsonl'}\n": flat,
        f"has one class folder (train); a classifier needs at least two; {flat} holds metadata.jsonl: to read the "
        f"labels it lists, give --data {flat / 'metadata.jsonl'}\n": flat.parent,
        "its lines are 'path label' (as mmpretrain and Caffe list images): write them as a CSV manifest, e.g. "
        "(echo path,label; sed 's/ \\([^ ]*\\)$/,\\1/' train.txt) > train.csv, and give --data train.csv\n": listed,
        "--data torch/cifar10 is timm's name for a torchvision dataset: save it as class folders, or hand it to "
        "ddptrain.fit(data=...) in Python (ddptrain fetches no dataset by name)\n": "torch/cifar10",
        "--data hfds/beans is timm's name for a Hugging Face dataset: --data hf:beans once it is in the datasets "
        "cache, or a save_to_disk folder (ddptrain fetches no dataset by name)\n": "hfds/beans",
        "by_split: its folders test, train are splits, not classes (each holds class folders: disc, ring); ddptrain "
        "takes the training part from train/ and the validation part from val/ (or valid/, validation/): name them "
        f"so, or give --data {by_split / 'train'} to split it by --val-split\n": by_split,
        "has no class sub-folders": empty,
        "has one class folder (disc); a classifier needs at least two": one,
        f"has one class folder (shapes); a classifier needs at least two; {inner} looks like the dataset itself: "
        f"--data {inner}\n": unpacked,
        "class folder 'star' in": hollow,
        "none of the 20 paths checked names a file, e.g. ": manifest,
    }


def test_data_layout_errors_come_before_launch_in_one_line_without_torch(tmp_path, no_torch):
    for message, data in _layouts(tmp_path).items():
        proc = _train(data, tmp_path / "run", no_torch)
        assert proc.returncode != 0 and proc.stderr.count("\n") == 1, (message, proc.stderr[-2000:])
        assert message in proc.stderr and "resume" not in proc.stderr, proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "model, close",
    [
        ("resnet1800", "Did you mean: resnet18"),
        ("timm:resnt18", "Did you mean: timm:resnet18"),
        ("conv3x3", "unknown torchvision model"),  # a helper in torchvision's resnet.py, not a model
    ],
)
def test_a_misspelled_model_is_refused_before_launch_with_the_closest_names(tiny_shapes, tmp_path, model, close):
    proc = run_cli(
        ["train", "--data", tiny_shapes, "--out", tmp_path / "run", *TINY, "--nproc", 2, "--model", model],
        check=False,
    )
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1, proc.stderr[-3000:]
    assert f"--model {model}: unknown" in proc.stderr and close in proc.stderr
    assert not (tmp_path / "run").exists()  # no process started, nothing written


@pytest.mark.slow
def test_a_model_that_fails_in_set_up_is_said_once_per_node_without_resume_advice(tiny_shapes, tmp_path):
    (tmp_path / "net.py").write_text("def build(num_classes):\n    raise ValueError('no such width')\n")
    model = f"{tmp_path / 'net.py'}:build"
    proc = run_cli(
        ["train", "--data", tiny_shapes, "--out", tmp_path / "run", *TINY, "--nproc", 2, "--model", model],
        check=False,
    )
    assert proc.returncode != 0
    assert proc.stderr.count("raised ValueError: no such width") == 1, proc.stderr[-3000:]
    assert "--resume auto" not in proc.stderr and "Traceback" not in proc.stderr
    # the run folder says why it stopped (a batch job's log may be gone): train.log's last line and the marker
    last = (tmp_path / "run" / "train.log").read_text().splitlines()[-1]
    assert " ERROR the run stopped: --model " in last and "raised ValueError: no such width" in last, last
    assert json.loads((tmp_path / "run" / ".ddptrain-run.json").read_text())["ended"]["how"] == "failed"


@pytest.mark.slow
def test_a_data_error_met_in_loader_workers_is_one_line_naming_the_source(tmp_path):
    """The report: a CSV whose relative paths do not resolve printed 128 lines of two tracebacks."""
    images = write_synthetic(tmp_path / "images", classes=2, per_class=2)
    manifest = tmp_path / "list.csv"
    rows = [(str(p.relative_to(tmp_path)), p.parent.name) for p in sorted(images.rglob("*.jpg"))]
    rows += [(f"images/moved/{i}.jpg", ["disc", "ring"][i % 2]) for i in range(160)]
    with open(manifest, "w", newline="") as handle:
        csv.writer(handle).writerows([("path", "label"), *rows])
    proc = run_cli(
        ["train", "--data", manifest, "--out", tmp_path / "run", *TINY, "--nproc", 2, "--workers", 1, "--epochs", 1],
        check=False,
    )
    assert proc.returncode != 0
    error = [line for line in proc.stderr.splitlines() if "64 images in a row could not be read" in line]
    assert len(error) == 1, proc.stderr[-4000:]
    assert (
        f"CSV manifest {manifest}" in error[0] and "relative paths in a manifest are relative to its folder" in error[0]
    )
    assert "Traceback" not in proc.stderr and "--resume auto" not in proc.stderr


@pytest.mark.slow
def test_val_split_0_trains_without_validation_and_writes_no_best(tiny_shapes, tmp_path):
    """The report: --val-split 0 logged val_top1 0.0000 and picked best.pt on nothing."""
    run_dir = tmp_path / "run"
    proc = run_cli(["train", "--data", tiny_shapes, "--out", run_dir, *TINY, "--val-split", 0, "--epochs", 2])
    assert proc.stderr.count("no validation images (--val-split 0): training only") == 1
    metrics = read_metrics(run_dir)
    assert [m["epoch"] for m in metrics] == [0, 1] and not any("val_top1" in m for m in metrics)
    assert (run_dir / "checkpoints" / "last.pt").is_file() and not (run_dir / "checkpoints" / "best.pt").exists()
    refused = run_cli(
        ["train", "--data", tiny_shapes, "--out", tmp_path / "other", *TINY, "--val-split", 0, "--patience", 2],
        check=False,
    )
    assert refused.returncode != 0 and "--patience 2 needs validation images" in refused.stderr


def test_shard_and_train_split_alike_by_default():
    """The report: `ddptrain shard` defaulted to --seed 0, train to 42."""
    args = build_parser().parse_args(["shard", "--data", "d", "--out", "s"])
    assert (args.seed, args.val_split) == (Config().optim.seed, Config().data.val_split)


@pytest.mark.slow
def test_eval_of_a_folder_trained_checkpoint_on_its_shards_agrees_or_says_why_not(tiny_shapes, straight, tmp_path):
    """The report: eval of a folder-trained checkpoint on its shards was refused with a false message."""
    checkpoint = straight / "checkpoints" / "best.pt"
    same = tmp_path / "same"
    run_cli(["shard", "--data", tiny_shapes, "--out", same, "--seed", 3, "--val-split", 0.25])
    on_shards = json_lines(run_cli(["eval", "--checkpoint", checkpoint, "--data", same]).stdout)[0]
    on_folder = json_lines(run_cli(["eval", "--checkpoint", checkpoint, "--data", tiny_shapes]).stdout)[0]
    assert (on_shards["samples"], on_shards["top1"]) == (on_folder["samples"], on_folder["top1"])
    assert abs(on_shards["loss"] - on_folder["loss"]) < 1e-6  # the same images, summed in another order

    other = tmp_path / "other"
    run_cli(["shard", "--data", tiny_shapes, "--out", other])  # the defaults: another seed than the run's 3
    refused = run_cli(["eval", "--checkpoint", checkpoint, "--data", other], check=False)
    assert refused.returncode != 0 and refused.stdout == ""
    assert "is a shard set split with --seed 42 --val-split 0.2, and" in refused.stderr
    assert "was trained on a split with --seed 3 --val-split 0.25" in refused.stderr
    assert json.loads((straight / "class_indices.json").read_text())  # the run itself is untouched


def test_folders_that_archivers_and_disks_make_are_not_classes(tmp_path):
    """A dataset zipped on a Mac unpacks with a __MACOSX folder of "._" copies, a disk's root holds lost+found: each
    was taken for a class folder without images, and refused."""
    from ddptrain.data.sources import Reading, load_split
    from ddptrain.data.sources.folder import FolderSource

    data = write_synthetic(tmp_path / "shapes", classes=2, per_class=4)
    for name in ("__MACOSX", "lost+found"):
        (data / name / "disc").mkdir(parents=True)
        (data / name / "disc" / "._0.jpg").write_bytes(b"\x00\x05\x16\x07")
    FolderSource().check(str(data), Reading())  # the checks before launch pass ...
    split = load_split(data, 0.25, seed=0)  # ... and the listing takes the two classes only
    assert split.classes == ["disc", "ring"] and len(split.train) + len(split.val) == 8


def test_a_folder_split_as_roboflow_exports_it_trains_on_train_and_validates_on_valid(tmp_path, caplog):
    """train/, valid/ and test/ (Roboflow's classification export, in any case): once three classes named after
    the splits; now the training and validation parts, and one line saying test/ is not read."""
    import logging

    from ddptrain.data.sources import load_split

    data = tmp_path / "export"
    for part, count in (("train", 4), ("Valid", 2), ("test", 3)):
        write_synthetic(data / part, classes=2, per_class=count)
    with caplog.at_level(logging.INFO, logger="ddptrain"):
        split = load_split(data, 0.2, seed=0)
    assert split.classes == ["disc", "ring"] and (len(split.train), len(split.val)) == (8, 4)
    assert all("/Valid/" in split.val.path(i) for i in range(len(split.val)))
    assert [r.getMessage() for r in caplog.records if "not read" in r.getMessage()] == [
        f"{data}: test/ is not read in training (training from train/, validation from Valid/); evaluate on it with "
        f"ddptrain eval --data {data / 'test'} --split all"
    ]


def test_a_validation_part_that_lacks_a_class_is_said_and_one_with_an_extra_class_is_refused(tmp_path):
    """val/ without a folder for one class was blamed on "too few images for --val-split 0.2", which a given split
    does not use; val/ with a class train/ does not have was refused as a class "the model does not know"."""
    from ddptrain.data.sources import load_split
    from ddptrain.data.split import unvalidated_classes
    from ddptrain.errors import DataError

    data = write_synthetic(tmp_path / "data" / "train", classes=2, per_class=3).parent
    write_synthetic(data / "val", classes=1, per_class=2)
    split = load_split(data, 0.2, seed=0)
    assert split.classes == ["disc", "ring"] and len(split.val) == 2
    assert unvalidated_classes(split, 0.2) == (
        "no validation image for class ring (the data's own split): its accuracy is not measured"
    )
    many = write_synthetic(tmp_path / "many", classes=8, per_class=1)  # one image each: none held out
    (many / "disc" / "extra.jpg").write_bytes((many / "disc" / "disc_0000.jpg").read_bytes())
    assert unvalidated_classes(load_split(many, 0.2, seed=0), 0.2) == (
        "no validation image for classes crescent, cross, hexagon, ring, square, star, triangle (too few images for "
        "--val-split 0.2): their accuracy is not measured"
    )
    import types

    import numpy as np

    from ddptrain.data.split import Split

    wide = Split([f"c{i:02d}" for i in range(12)], None, types.SimpleNamespace(labels=np.array([0])), "shards", None)
    assert unvalidated_classes(wide, 0.2).startswith(  # a thousand classes are not a thousand names on one line
        "no validation image for classes c01, c02, c03, c04, c05, c06, c07, c08, ... (11 in all) (the data's own"
    )
    write_synthetic(data / "val", classes=3, per_class=2)
    with pytest.raises(DataError) as refused:
        load_split(data, 0.2, seed=0)
    assert str(refused.value) == (
        f"{data / 'val'} has class folders {data / 'train'} (the training part) does not have: star"
    )


def test_two_class_folders_that_are_one_folder_are_refused(tmp_path):
    """`formica -> ants`: a link beside the folder it names made a third class of the same images, each image
    labelled twice and free to land in training under one label and in validation under the other, in silence."""
    from ddptrain.data.sources import Reading, load_split
    from ddptrain.data.sources.folder import FolderSource
    from ddptrain.errors import DataError

    data = write_synthetic(tmp_path / "data", classes=2, per_class=3)
    (data / "zdisc").symlink_to("disc")
    said = f"{data}: class folders disc and zdisc are one folder (a link to it): each of its images would carry both"
    for refuse in (lambda: FolderSource().check(str(data), Reading()), lambda: load_split(data, 0.2, seed=0)):
        with pytest.raises(DataError, match=re.escape(said)):
            refuse()


@pytest.mark.parametrize("linked", ["val", "val/disc"])
def test_a_validation_part_linked_to_the_training_part_is_refused(tmp_path, linked):
    """val/ made a link to train/ (or val/disc to train/disc) to have something there: validation measured the
    images the model trains on, and the run reported their accuracy as validation's, in silence."""
    from ddptrain.data.sources import Reading, load_split
    from ddptrain.data.sources.folder import FolderSource
    from ddptrain.errors import DataError

    data = write_synthetic(tmp_path / "data" / "train", classes=2, per_class=3).parent
    if linked == "val":
        (data / "val").symlink_to("train")
    else:
        write_synthetic(data / "val", classes=2, per_class=1)
        shutil.rmtree(data / "val" / "disc")
        (data / "val" / "disc").symlink_to("../train/disc")
    said = f"{data / linked} is {data / 'train' / linked[4:]} (a link to it): validation would measure the images"
    for refuse in (lambda: FolderSource().check(str(data), Reading()), lambda: load_split(data, 0.2, seed=0)):
        with pytest.raises(DataError, match=re.escape(said)):
            refuse()
