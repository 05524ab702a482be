"""--task multilabel end to end on a generated multi-label CSV manifest, 2 processes: `--eval-metric map` picks
best.pt, a stop after one epoch + `--resume auto` ends bit-identical to the straight run, `eval` reproduces the
best evaluation, `predict` lists the labels above the threshold, the export says the task."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from ..conftest import TIMING_KEYS, assert_same_weights, json_lines, load_checkpoint, read_metrics, run_cli

FLAGS = [
    "--task", "multilabel", "--eval-metric", "map", "--model", "timm:test_resnet", "--img-size", 32,
    "--batch-size", 4, "--epochs", 2, "--lr", 0.05, "--workers", 1, "--val-split", 0.25, "--seed", 4,
    "--label-smoothing", 0.1, "--mixup", 0.2, "--nproc", 2,
]  # fmt: skip


@pytest.fixture(scope="module")
def manifest(tiny_shapes, tmp_path_factory) -> Path:
    """Each image: its shape, and every second one also the next shape; written a|b and b|a alike."""
    path = tmp_path_factory.mktemp("multilabel") / "labels.csv"
    images = sorted(tiny_shapes.rglob("*.jpg"))
    shapes = sorted({p.parent.name for p in images})
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["path", "label"])
        for i, image in enumerate(images):
            labels = [image.parent.name] + ([shapes[(shapes.index(image.parent.name) + 1) % 3]] if i % 2 else [])
            writer.writerow([image, "|".join(labels if i % 4 else labels[::-1])])
    return path


@pytest.fixture(scope="module")
def straight(manifest, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("ml") / "run"
    run_cli(["train", "--data", manifest, "--out", run_dir, *FLAGS])
    return run_dir


def test_map_picks_best_pt_and_a_resumed_run_ends_bit_identical(manifest, straight, tmp_path):
    metrics = read_metrics(straight)
    maps = [m["val_map"] for m in metrics]
    assert all(m["eval_metric"] == "map" and 0 <= m["val_map"] <= 1 and "val_macro_f1" in m for m in metrics)
    best = load_checkpoint(straight / "checkpoints" / "best.pt")
    assert best["metrics"]["val_map"] == max(maps) and best["best_metric"] == "map"
    assert best["metrics"]["epoch"] == maps.index(max(maps))

    run_dir = tmp_path / "run"
    run_cli(["train", "--data", manifest, "--out", run_dir, *FLAGS, "--stop-after-epochs", 1])
    run_cli(["train", "--data", manifest, "--out", run_dir, *FLAGS, "--resume", "auto"])
    assert_same_weights(run_dir, straight)
    strip = [{k: v for k, v in m.items() if k not in TIMING_KEYS} for m in read_metrics(run_dir)]
    assert strip == [{k: v for k, v in m.items() if k not in TIMING_KEYS} for m in metrics]
    assert "ring|star" in (run_dir / "splits" / "val.txt").read_text() + (run_dir / "splits" / "train.txt").read_text()


def test_eval_predict_and_export_of_a_multilabel_model(tiny_shapes, manifest, straight, tmp_path):
    checkpoint = straight / "checkpoints" / "best.pt"
    evaluated = json_lines(run_cli(["eval", "--checkpoint", checkpoint, "--data", manifest, "--nproc", 2]).stdout)[-1]
    recorded = json.loads((straight / "best_eval.json").read_text())
    assert evaluated["samples"] == recorded["samples"] == 9
    assert evaluated["map"] == pytest.approx(recorded["map"], abs=1e-12)
    assert evaluated["macro_f1"] == pytest.approx(recorded["macro_f1"], abs=1e-12)

    predicted = json_lines(run_cli(["predict", "--checkpoint", checkpoint, tiny_shapes / "ring"]).stdout)
    assert len(predicted) == 12
    for line in predicted:  # every class at or above the threshold, and only those
        assert line["threshold"] == 0.5 and [e["class"] for e in line["labels"]] == [
            e["class"] for e in line["topk"] if e["score"] >= 0.5
        ]
    exported = tmp_path / "m.safetensors"
    run_cli(["export", "--checkpoint", checkpoint, "--format", "safetensors", "--out", exported])
    card = json.loads((tmp_path / "m.safetensors.json").read_text())
    assert (card["task"], card["threshold"]) == ("multilabel", 0.5)
    assert json_lines(run_cli(["predict", "--checkpoint", exported, tiny_shapes / "ring"]).stdout) == predicted


def test_a_folder_or_a_single_label_metric_is_refused_for_the_task_in_one_line(tiny_shapes, manifest, tmp_path):
    folder = run_cli(["train", "--data", tiny_shapes, "--out", tmp_path / "a", "--task", "multilabel"], check=False)
    assert folder.returncode != 0 and "gives one class per image; give a CSV manifest" in folder.stderr
    metric = run_cli(["train", "--data", manifest, "--out", tmp_path / "b", "--eval-metric", "map"], check=False)
    assert (
        metric.returncode == 2 and "--eval-metric map is a multi-label metric: add --task multilabel" in metric.stderr
    )
