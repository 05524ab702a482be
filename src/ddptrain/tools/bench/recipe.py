"""`ddptrain bench recipe`: what the strong recipe (RandAugment, Mixup/CutMix, label smoothing, random erasing, an
EMA of the weights) buys over the basic one (crop and flip), from scratch and from a pretrained file, at the same
epochs, on the same data and processes — accuracy per epoch and seconds per epoch, side by side.

The pretrained file is made in the same run: the model is first trained (basic recipe) on another generated set —
other images, more classes — and its checkpoint is the `--weights` of the fine-tunes, whose head of another size is
re-initialised, as with ImageNet weights."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ...util import flags

# configs/cpu-fast.yaml's recipe without its label smoothing: crops of at least 60 % of the image, flips
BASIC: Dict[str, object] = {
    "optimizer": "adamw",
    "lr": 0.005,
    "weight-decay": 0.05,
    "warmup-epochs": 1,
    "min-crop-scale": 0.6,
}
STRONG: Dict[str, object] = {
    **BASIC,
    "auto-augment": "randaugment",
    "random-erasing": 0.25,
    "mixup": 0.8,
    "cutmix": 1.0,
    "label-smoothing": 0.1,
    "ema-decay": 0.99,
}
RECIPES = {"basic": BASIC, "strong": STRONG}
SOURCE_CLASSES, SOURCE_SEED = 8, 1  # the set the pretrained file is trained on


@dataclass
class RecipeWork:
    data: Path
    model: str
    img_size: int
    batch_size: int  # per process
    epochs: int
    workers: int
    nproc: int
    device: str


def train(work: RecipeWork, data: Path, out: Path, recipe: Dict[str, object], weights: Optional[Path]) -> List[Dict]:
    """One `ddptrain train` run; its metrics.jsonl records."""
    options = {
        "data": data,
        "out": out,
        "model": work.model,
        "img-size": work.img_size,
        "batch-size": work.batch_size,
        "epochs": work.epochs,
        "workers": work.workers,
        "nproc": work.nproc,
        "device": work.device,
        **recipe,
        **({"weights": weights} if weights else {}),
    }
    cmd = [sys.executable, "-m", "ddptrain", "train", *flags(options)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def summary(recipe: str, start: str, records: List[Dict]) -> Dict:
    """One table row: accuracy at the end and at its best, and seconds per epoch — training alone, and with the
    evaluations (the EMA's included) from one epoch's end to the next."""
    ends = [r["time"] for r in records]
    row = {
        "recipe": recipe,
        "start": start,
        "best val_top1": max(r["val_top1"] for r in records),
        "final val_top1": records[-1]["val_top1"],
        "final val_top1 EMA": records[-1].get("val_top1_ema", ""),
        "train s/epoch": statistics.fmean(r["epoch_time_s"] for r in records[1:] or records),
        "s/epoch with eval": (ends[-1] - ends[0]) / max(len(ends) - 1, 1)
        if len(ends) > 1
        else records[0]["epoch_time_s"],
    }
    row["curve"] = [r["val_top1"] for r in records]
    row["curve_ema"] = [r["val_top1_ema"] for r in records if "val_top1_ema" in r]
    return row


def compare(work: RecipeWork, tmp: Path, source_per_class: int = 128, progress=print) -> Tuple[Dict, List[Dict]]:
    from ..demodata import make_dataset

    progress(f"bench recipe: 1/5 making the pretrained file ({work.model}, basic recipe, {SOURCE_CLASSES} classes)")
    source = make_dataset(tmp / "source", SOURCE_CLASSES, source_per_class, SOURCE_SEED, progress=False)
    source_top1 = max(r["val_top1"] for r in train(work, source, tmp / "pretrain", BASIC, None))
    pretrained = tmp / "pretrain" / "checkpoints" / "best.pt"
    rows = []
    plan = [(recipe, start) for start in ("scratch", "pretrained") for recipe in RECIPES]
    for index, (recipe, start) in enumerate(plan, start=2):
        progress(f"bench recipe: {index}/5 {recipe} recipe from {start}")
        weights = pretrained if start == "pretrained" else None
        records = train(work, work.data, tmp / f"{recipe}-{start}", RECIPES[recipe], weights)
        rows.append(summary(recipe, start, records))
    result: Dict[str, object] = {
        "basic": _describe(BASIC),
        "strong": _describe(STRONG),
        "pretrained_on": f"generated, {SOURCE_CLASSES} classes x {source_per_class}, seed {SOURCE_SEED}",
        "pretrained_val_top1": source_top1,
    }
    for start in ("scratch", "pretrained"):
        basic, strong = (next(r for r in rows if r["recipe"] == name and r["start"] == start) for name in RECIPES)
        result[f"strong_over_basic_train_time_{start}"] = strong["train s/epoch"] / basic["train s/epoch"]
        result[f"strong_over_basic_epoch_time_{start}"] = strong["s/epoch with eval"] / basic["s/epoch with eval"]
        result[f"strong_minus_basic_final_top1_{start}"] = strong["final val_top1"] - basic["final val_top1"]
    return result, rows


def _describe(recipe: Dict[str, object]) -> str:
    return " ".join(f"--{key} {value}" for key, value in recipe.items())


def figure(path: Path, rows: Sequence[Dict], title: str) -> None:
    """Validation top-1 per epoch for each run (the EMA's dashed), and seconds per epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (curves, times) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [3, 2]})
    colours = {"basic": "#4c72b0", "strong": "#dd8452"}
    for row in rows:
        style = "-" if row["start"] == "scratch" else ":"
        epochs = range(1, len(row["curve"]) + 1)
        label = f"{row['recipe']}, {row['start']}"
        curves.plot(epochs, row["curve"], style, color=colours[row["recipe"]], marker="o", ms=3, label=label)
        if row["curve_ema"]:
            curves.plot(epochs, row["curve_ema"], style, color="#55a868", lw=1, label=f"{label}, EMA")
    curves.set_xlabel("epoch")
    curves.set_ylabel("val top-1")
    curves.set_ylim(0, 1.02)
    curves.legend(fontsize=7, loc="lower right")
    curves.set_title(title, fontsize=9)
    labels = [f"{r['recipe']}\n{r['start']}" for r in rows]
    trained = [r["train s/epoch"] for r in rows]
    total = [r["s/epoch with eval"] for r in rows]
    positions = range(len(rows))
    times.bar([p - 0.2 for p in positions], trained, 0.4, label="training", color="#4c72b0")
    times.bar([p + 0.2 for p in positions], total, 0.4, label="with evaluation", color="#8172b3")
    times.set_xticks(list(positions), labels, fontsize=7)
    times.set_ylabel("seconds per epoch")
    times.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
