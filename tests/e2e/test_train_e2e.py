"""The whole path with real processes: `ddptrain train --nproc 2` (gloo), then eval and predict."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import timm
import torch
from PIL import Image

from ddptrain.config import DataConfig
from ddptrain.data.transforms import Preprocess, eval_transform, normalize
from ddptrain.util import counted

from ..conftest import json_lines, read_metrics, run_cli, save_odd_modes, write_synthetic

METRIC_KEYS = {
    "epoch",
    "train_loss",
    "val_loss",
    "val_top1",
    "val_top5",
    "val_samples",
    "lr",
    "images_per_sec",
    "epoch_time_s",
    "data_wait_frac",
}
EPOCHS = 6


def _write_corrupt(folder: Path) -> list:
    good = next(folder.glob("*.jpg")).read_bytes()
    files = {"truncated.jpg": good[: len(good) // 3], "zero_bytes.png": b"", "text_named.jpg": b"hello"}
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return list(files)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """train/ and val/ layout: 3 classes; odd image modes and corrupt files in train; 7 readable
    validation images (not a multiple of 2 ranks) plus one corrupt one."""
    root = tmp_path_factory.mktemp("e2e")
    write_synthetic(root / "train", classes=3, per_class=12)
    save_odd_modes(root / "train" / "disc", "odd")
    _write_corrupt(root / "train" / "ring")
    write_synthetic(root / "val", classes=3, per_class=3, start=100)
    for name in ("ring", "star"):
        sorted((root / "val" / name).glob("*.jpg"))[0].unlink()
    disc = sorted((root / "val" / "disc").glob("*.jpg"))[0]
    Image.open(disc).convert("L").save(root / "val" / "disc" / "gray.png")
    disc.unlink()
    (root / "val" / "star" / "broken.jpg").write_bytes(b"\xff\xd8\xff garbage")
    Image.open(disc.with_name("gray.png")).save(root / "val" / "star" / "anim.gif")  # not read from folders: said
    return root


@pytest.fixture(scope="module")
def trained(dataset, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("run") / "r"
    proc = run_cli(
        [
            "train",
            "--data",
            dataset,
            "--out",
            run_dir,
            "--model",
            "timm:test_resnet",
            "--img-size",
            32,
            "--batch-size",
            4,
            "--epochs",
            EPOCHS,
            "--optimizer",
            "adamw",
            "--lr",
            2e-3,
            "--weight-decay",
            0.0,
            "--nproc",
            2,
            "--workers",
            1,
            "--log-every",
            2,
            "--seed",
            1,
            "--progress-every",
            1e-6,  # a line after every step and every validation batch
        ]
    )
    (run_dir.parent / "console.txt").write_text(proc.stderr)  # log lines go to stderr, as the epoch lines do
    return run_dir


def test_progress_lines_reach_the_console_and_train_log_without_a_terminal(trained):
    """The console is a pipe here, as under SLURM or nohup: no bar, but timed lines a reader can tell from a hang."""
    pattern = re.compile(
        r"epoch (\d)/6 \d+%: step \d+/\d+ \(global \d+\)(  loss [\d.]+  lr \S+)?  [\d.]+ img/s  data_wait \d+%  "
        r"epoch ends in ~\d+s"
    )
    for where in ((trained.parent / "console.txt").read_text(), (trained / "train.log").read_text()):
        epochs = {int(m.group(1)) for m in pattern.finditer(where)}
        assert epochs and epochs <= set(range(1, EPOCHS + 1)), where[-2000:]  # counted from 1, as the epoch lines
        assert any(m.group(2) for m in pattern.finditer(where))  # the loss once one was reduced
        # the validation pass too (rank 0's share of the 7 validation images, in batches of 4)
        validation = re.compile(
            r"^(\S+ \S+ INFO )?validation: (\d)/\2 batches \(100%\), [\d.]+ batches/s, ends in ~0s$", re.M
        )
        assert validation.search(where), where[-2000:]
    assert "\r" not in (trained.parent / "console.txt").read_text()  # no bar frames in a pipe


def test_the_start_lines_count_processes_and_workers_in_words(trained):
    """'on 2 processes', '1 loader worker per process': no 'process(es)' or '1 loader workers' for a reader."""
    console = (trained.parent / "console.txt").read_text()
    assert "training timm:test_resnet on 2 processes, cpu," in console
    assert ", 1 loader worker per process" in console
    assert "(es)" not in console


def test_two_ranks_write_a_complete_run_dir(trained):
    for name in (
        "config.yaml",
        "class_indices.json",
        "metrics.jsonl",
        "train.log",
        "splits/train.txt",
        "splits/val.txt",
        "checkpoints/last.pt",
        "checkpoints/best.pt",
    ):
        assert (trained / name).is_file(), name
    assert list((trained / "tb").glob("events.out.tfevents.*"))
    assert json.loads((trained / "class_indices.json").read_text()) == {"0": "disc", "1": "ring", "2": "star"}


def test_every_metric_key_each_epoch_and_loss_falls(trained):
    metrics = read_metrics(trained)
    assert [m["epoch"] for m in metrics] == list(range(EPOCHS))
    for record in metrics:
        assert set(record) >= METRIC_KEYS
        assert record["world_size"] == 2 and record["images_per_sec"] > 0
        assert 0.0 <= record["data_wait_frac"] < 1.0
    assert (metrics[-1]["train_loss"] + metrics[-2]["train_loss"]) / 2 < metrics[0]["train_loss"]


def test_val_samples_is_the_true_count_on_two_ranks(trained):
    assert {m["val_samples"] for m in read_metrics(trained)} == {7}


def test_unreadable_images_are_skipped_counted_and_reported(trained):
    metrics = read_metrics(trained)
    assert all(m["skipped_images"] >= 1 for m in metrics)  # at least the corrupt validation file, every epoch
    log = (trained / "train.log").read_text()
    first = metrics[0]["skipped_images"]  # train and val, counted in words ("1 unreadable image", "3 ... images")
    assert f"epoch 1: {counted(first, 'unreadable image')} skipped (" in log
    console = (trained.parent / "console.txt").read_text()
    # once per file and rank, named once: "[rank 1] WARNING skipped ...", rank 0's line unprefixed as all its lines
    assert "skipped unreadable image" in console and not re.search(r"rank \d+: skipped", console)
    stderr_names = ("truncated.jpg", "zero_bytes.png", "text_named.jpg", "broken.jpg")
    assert sum(name in log for name in stderr_names) >= 1


@pytest.mark.parametrize("nproc", [1, 2])
def test_eval_matches_the_training_run(trained, dataset, nproc):
    proc = run_cli(["eval", "--checkpoint", trained / "checkpoints" / "last.pt", "--data", dataset, "--nproc", nproc])
    report = json_lines(proc.stdout)
    assert len(report) == 1, proc.stdout  # only rank 0 prints
    said = "1 picture in a format ddptrain does not read from folders is left out (1 .gif: star/anim.gif)"
    assert proc.stderr.count(said) == 1  # by rank 0, though every rank lists the folder
    last = read_metrics(trained)[-1]
    assert report[0]["samples"] == 7 and report[0]["skipped"] == 1
    assert report[0]["top1"] == last["val_top1"] and report[0]["top5"] == last["val_top5"]
    # same weights *and* BatchNorm statistics on every rank as in the saved checkpoint
    assert report[0]["loss"] == pytest.approx(last["val_loss"], rel=1e-5)
    assert sum(c["count"] for c in report[0]["per_class"].values()) == 7


def test_checkpoint_loads_into_a_plain_model_and_predict_agrees(trained, dataset):
    ckpt = trained / "checkpoints" / "last.pt"
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    assert not any(k.startswith(("module.", "_orig_mod.")) for k in state["model"])
    model = timm.create_model("test_resnet", num_classes=3)  # plain model, no DDP
    model.load_state_dict(state["model"])
    model.eval()
    images = sorted((dataset / "val").rglob("*.jpg"))[:4] + [dataset / "val" / "disc" / "gray.png"]
    images = [p for p in images if p.name != "broken.jpg"]
    # test_resnet's pretrained config: mean and std 0.5, bilinear, evaluation crop 0.95 (resize to 33, crop 32)
    saved = state["config"]
    assert (saved["mean"], saved["std"], saved["interpolation"], saved["crop_fraction"]) == (
        (0.5, 0.5, 0.5),
        (0.5, 0.5, 0.5),
        "bilinear",
        0.95,
    )
    # the checkpoint's preprocessing through ddptrain's public pieces (their pixels against torchvision's Resize +
    # CenterCrop: data/test_transforms.py, data/test_crops.py); here: predict = the plain model on those inputs
    preprocess = Preprocess.of(DataConfig(**{k: saved[k] for k in ("img_size", "mean", "std", "crop_fraction")}))
    prepare = eval_transform(32, preprocess)
    with torch.no_grad():
        batch = normalize(torch.stack([prepare.load(p.read_bytes()) for p in images]), preprocess.stats)
        expected = [state["class_names"][i] for i in model(batch).argmax(1).tolist()]
    predicted = json_lines(run_cli(["predict", "--checkpoint", ckpt, *images, "--topk", 2]).stdout)
    assert [p["path"] for p in predicted] == [str(p) for p in images]
    assert [p["topk"][0]["class"] for p in predicted] == expected
    assert all(len(p["topk"]) == 2 and 0 <= p["topk"][0]["prob"] <= 1 for p in predicted)


def test_predict_reports_a_bad_path_and_keeps_going(trained, dataset, tmp_path):
    ckpt = trained / "checkpoints" / "last.pt"
    notes = tmp_path / "notes.jpg"
    notes.write_text("a text file with an image's name")
    proc = run_cli(
        ["predict", "--checkpoint", ckpt, dataset / "val" / "star", dataset / "missing.jpg", notes]
        + ["--progress-every", 1e-6],  # stdout is a pipe: a line on stderr after each image
        check=False,
    )
    lines = json_lines(proc.stdout)
    assert proc.returncode == 1
    assert sum("topk" in line for line in lines) == 2
    star = sorted(str(p) for p in (dataset / "val" / "star").iterdir() if p.suffix != ".gif")  # left out, said:
    assert "1 picture in a format ddptrain does not read from folders is left out (1 .gif: anim.gif)" in proc.stderr
    assert [line["path"] for line in lines] == [*star, str(dataset / "missing.jpg"), str(notes)]  # input order
    done = re.findall(r"^predict: (\d+)/5 images \(\d+%\), [\d.]+ images/s, ends in ~\d+s$", proc.stderr, re.M)
    assert done[-1] == "5" and "\r" not in proc.stderr, proc.stderr[-2000:]
    errors = {line["path"].split("/")[-1]: line["error"] for line in lines if "error" in line}
    assert set(errors) == {"broken.jpg", "missing.jpg", "notes.jpg"}
    assert errors["notes.jpg"] == "not an image (no image format recognised in its content)"  # not PIL's BytesIO repr


def test_best_eval_json_is_the_best_epochs_exact_evaluation(trained):
    best = json.loads((trained / "best_eval.json").read_text())
    first_best = max(read_metrics(trained), key=lambda m: m["val_top1"])  # the epoch that wrote best.pt
    assert best["epoch"] == first_best["epoch"] and best["top1"] == first_best["val_top1"]
    assert best["class_names"] == ["disc", "ring", "star"] and best["samples"] == 7
    confusion = best["confusion"]
    assert sum(map(sum, confusion)) == 7  # every validation image once, over both ranks
    assert sum(confusion[i][i] for i in range(3)) / 7 == pytest.approx(best["top1"])


def test_report_cli_draws_the_run(trained, tmp_path):
    out = tmp_path / "report"
    assert run_cli(["report", trained, "--out", out]).stdout.strip() == str(out / "report.html")  # the page to open
    for name in ("curves.png", "throughput.png", "epoch_time.png", "confusion.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert f"| {trained.name} | 2 | {EPOCHS} |" in (out / "report.md").read_text()
