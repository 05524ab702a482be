"""`ddptrain demo`: the whole path on a fresh machine with no GPU and no network."""

from __future__ import annotations

import io
import json
import logging
import time
from pathlib import Path
from typing import List, Optional

from ..config import LaunchConfig
from ..runtime.env import DistEnv
from ..runtime.launch import check_nproc, launch
from ..util import counted, flags, top5_says_something
from .demodata import dataset_is_complete, make_dataset

log = logging.getLogger("ddptrain")

DEMO_CLASSES, DEMO_PER_CLASS, DEMO_SEED = 5, 200, 0
# A short recipe that reaches high accuracy on the generated shapes on two CPU cores: timm's
# tiny ResNet (0.37 M parameters) at 64 px, so a step is cheap and the gradient all-reduce small.
DEMO_RECIPE = {
    "model": "timm:test_resnet",
    "img-size": 64,
    "batch-size": 16,
    "optimizer": "adamw",
    "lr": 5e-3,
    "weight-decay": 0.05,
    "warmup-epochs": 1,
    "min-crop-scale": 0.6,
    "label-smoothing": 0.1,
    "val-split": 0.2,
    "seed": 0,
}
DEMO_EPOCHS = 30


def demo_train_argv(data: str, out: str, epochs: int, device: str) -> List[str]:
    return [
        "train",
        *flags({"data": data, "out": out, "epochs": epochs, "device": device, "resume": "auto", **DEMO_RECIPE}),
    ]


def run_demo(data: str, out: str, epochs: Optional[int], nproc: Optional[int], device: str) -> int:
    started = time.perf_counter()
    if not dataset_is_complete(data, DEMO_CLASSES, DEMO_PER_CLASS, DEMO_SEED):
        log.info("generating the demo dataset in %s", data)
        make_dataset(data, DEMO_CLASSES, DEMO_PER_CLASS, DEMO_SEED)
    import torch

    from ..runtime.dist import resolve_device_kind

    kind = resolve_device_kind(device)
    nproc = nproc or (torch.cuda.device_count() if kind == "cuda" else 2)
    check_nproc(nproc, kind)
    epochs = epochs or DEMO_EPOCHS
    log.info("training on %s for %d epochs; run dir %s", counted(nproc, f"{kind} process"), epochs, out)
    argv = demo_train_argv(data, out, epochs, kind)
    code = launch(LaunchConfig(nproc=nproc), argv)
    if code != 0:
        return code
    best = Path(out) / "checkpoints" / "best.pt"
    report = _evaluate(best, data, kind)
    predictions = _predict_examples(best, data, Path(out), kind)
    from .report import write_report

    figures = write_report([out])
    _print_summary(out, report, predictions, figures, time.perf_counter() - started)
    return 0


def _evaluate(best: Path, data: str, kind: str) -> dict:
    from .inference import EvalOptions, run_eval

    log.info("evaluating %s on the validation split", best)
    return run_eval(EvalOptions(checkpoint=str(best), data=data, device=kind), DistEnv(), print_json=False)


def _predict_examples(best: Path, data: str, run_dir: Path, kind: str) -> List[dict]:
    """Top-2 for the last validation image of each class: images the model never trained on."""
    from ..data import splitfile
    from .inference import run_predict

    last = {name: relative for _, relative, name in splitfile.read(run_dir / "splits" / "val.txt")}
    examples = [str(Path(data) / relative) for _, relative in sorted(last.items())]
    buffer = io.StringIO()
    run_predict(str(best), examples, topk=2, device=kind, out=buffer)
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def _print_summary(out: str, report: dict, predictions: List[dict], figures: Path, elapsed_s: float) -> None:
    lines = [
        "",
        "== ddptrain demo summary",
        f"run dir         {out}",
        f"val top-1       {report['top1']:.4f} on {report['samples']} images"
        + (f" (top-5 {report['top5']:.4f})" if top5_says_something(len(report["class_names"])) else ""),
        f"total time      {elapsed_s:.0f} s",
        "predictions (validation images):",
    ]
    for item in predictions:
        best = item["topk"][0]
        lines.append(
            f"  {Path(item['path']).parent.name + '/' + Path(item['path']).name:28s} -> "
            f"{best['class']} ({best['prob']:.2f})"
        )
    lines.append(f"report: {figures.with_name('report.html')} (open it in a browser: curves, per-class results, ")
    lines.append("        the worst-classified validation images, timing; report.md and the PNGs beside it)")
    lines.append(f"see {out}/metrics.jsonl, {out}/train.log, TensorBoard: tensorboard --logdir {out}/tb")
    print("\n".join(lines), flush=True)
