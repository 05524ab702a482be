"""How far does the default recipe get on `make-dataset`'s shapes, and which recipe knob moves it?

Each variant is `ddptrain train` on the same data with the default recipe plus the variant's flags (2 processes,
10 epochs, 64 px unless a variant says otherwise); `--plain` runs the same question through a plain single-process
PyTorch loop instead (torchvision resnet18, AdamW with weight decay off norms and biases, one epoch of linear
warm-up then cosine to 1 %, images held in memory), so a difference between the two would be ddptrain's.

    python benchmarks/default_recipe.py --data data/shapes "" "--lr 3e-3" "--min-crop-scale 0.35" "--batch-size 16"
    python benchmarks/default_recipe.py --data data/shapes --plain rrc:0.08:64 rrc:0.6:16 shift:16
    python benchmarks/default_recipe.py --data data/shapes --plain --seed 1 --crop-fraction 1 --val-list RUN/splits/val.txt rrc:0.6:8

A plain variant is AUG:BATCH[:LR[:MODEL]] with AUG `rrc:SCALE` (RandomResizedCrop from SCALE to 1 of the area, as
ddptrain) or `shift` (resize to 72 px, a random 64-px crop: shifts of up to 8 px), both with horizontal flips; `+jitter`
(colour jitter, hue 0.5) and `+gray` (greyscale half the time) after AUG add to it, e.g. `rrc+jitter:0.6:64`.
Prints one line per variant: seconds, then validation top-1 after each epoch (and, for `--plain`, the top-1 on the
augmented training batches of each epoch: how well the model fits what it trains on; and the top-1 on 160 training
images scored as validation is, in evaluation mode with the evaluation transform: what the model kept of them).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Tuple


def ddptrain_variant(data: str, flags: str, epochs: int, img_size: int, nproc: int) -> Tuple[float, List[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "ddptrain", "train", "--data", data, "--out", str(run), "--nproc", str(nproc)]
        cmd += ["--epochs", str(epochs), "--img-size", str(img_size), *shlex.split(flags)]
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
        return seconds, [row["val_top1"] for row in rows if "val_top1" in row]


def plain_variant(
    data: str,
    spec: str,
    epochs: int,
    img_size: int,
    seed: int = 0,
    crop_fraction: float = 0.875,
    val_list: str = "",
) -> Tuple[float, List[float], List[float], List[float]]:
    import torch
    import torchvision
    from PIL import Image
    from torchvision.transforms import v2

    parts = spec.split(":")
    aug, *extras = parts.pop(0).split("+")
    scale = float(parts.pop(0)) if aug == "rrc" else 0.0
    batch = int(parts[0])
    lr = float(parts[1]) if len(parts) > 1 else 1e-3
    model_name = parts[2] if len(parts) > 2 else "resnet18"
    root = Path(data)
    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    items = [(path, k) for k, name in enumerate(classes) for path in sorted((root / name).glob("*.jpg"))]
    if val_list:  # ddptrain's own split: the run folder's splits/val.txt ("class/file.jpg<TAB>class" lines)
        chosen = {root / line.split("\t")[0] for line in Path(val_list).read_text().splitlines() if line[:1] != "#"}
        val, train = [i for i in items if i[0] in chosen], [i for i in items if i[0] not in chosen]
    else:
        random.Random(0).shuffle(items)
        n_val = len(items) // 5
        val, train = items[:n_val], items[n_val:]

    def load(path: Path, short: int = img_size * 3 // 2) -> torch.Tensor:
        image = Image.open(path).convert("RGB")
        ratio = short / min(image.size)
        image = image.resize((round(image.width * ratio), round(image.height * ratio)), Image.Resampling.BILINEAR)
        return v2.functional.pil_to_tensor(image)

    pixels = {path: load(path) for path, _ in items}
    if aug == "rrc":
        augment = v2.Compose([v2.RandomResizedCrop(img_size, scale=(scale, 1.0)), v2.RandomHorizontalFlip()])
    else:
        augment = v2.Compose([v2.Resize(img_size + 8), v2.RandomCrop(img_size), v2.RandomHorizontalFlip()])
    colour = {"jitter": v2.ColorJitter(0.4, 0.4, 0.4, 0.5), "gray": v2.RandomGrayscale(0.5)}
    augment = v2.Compose([augment, *(colour[name] for name in extras)])
    evaluate = v2.Compose([v2.Resize(round(img_size / crop_fraction)), v2.CenterCrop(img_size)])
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255

    def batch_of(images: List[torch.Tensor]) -> torch.Tensor:
        return (torch.stack(images).float() - mean) / std

    torch.manual_seed(seed)
    model = getattr(torchvision.models, model_name)(num_classes=len(classes))
    groups = [
        {"params": [p for p in model.parameters() if p.ndim > 1], "weight_decay": 0.05},
        {"params": [p for p in model.parameters() if p.ndim <= 1], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=lr)
    per_epoch = len(train) // batch
    total, warmup = per_epoch * epochs, per_epoch

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    def scored(chosen: List[Tuple[Path, int]]) -> float:
        model.eval()
        with torch.no_grad():
            x = batch_of([evaluate(pixels[path]) for path, _ in chosen])
            return (model(x).argmax(1) == torch.tensor([k for _, k in chosen])).float().mean().item()

    top1: List[float] = []
    fitted: List[float] = []
    kept: List[float] = []
    start = time.perf_counter()
    for epoch in range(epochs):
        model.train()
        random.Random(seed * 100003 + epoch).shuffle(train)
        right = 0
        for step in range(per_epoch):
            chunk = train[step * batch : (step + 1) * batch]
            x = batch_of([augment(pixels[path]) for path, _ in chunk])
            y = torch.tensor([k for _, k in chunk])
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out, y)
            right += (out.argmax(1) == y).sum().item()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
        fitted.append(right / (per_epoch * batch))
        top1.append(scored(val))
        kept.append(scored(random.Random(1).sample(sorted(train), len(val))))
    return time.perf_counter() - start, top1, fitted, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="make-dataset's output folder")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--plain", action="store_true", help="run the variants in a plain PyTorch loop")
    parser.add_argument("--seed", type=int, default=0, help="--plain: seed of the weights and the shuffling")
    parser.add_argument("--crop-fraction", type=float, default=0.875, help="--plain: evaluation crop fraction")
    parser.add_argument("--val-list", default="", help="--plain: validate on a ddptrain run's splits/val.txt")
    parser.add_argument("variants", nargs="+", help='ddptrain flags per variant ("" = the default recipe)')
    args = parser.parse_args()
    for variant in args.variants:
        if args.plain:
            seconds, top1, fitted, kept = plain_variant(
                args.data, variant, args.epochs, args.img_size, args.seed, args.crop_fraction, args.val_list
            )
        else:
            seconds, top1 = ddptrain_variant(args.data, variant, args.epochs, args.img_size, args.nproc)
            fitted, kept = [], []
        curve = " ".join(f"{value:.2f}" for value in top1)
        line = f"{variant or '(default)':40s} {seconds:5.0f} s  best {max(top1):.2f}  val top-1 {curve}"
        if fitted:
            line += "  train top-1 " + " ".join(f"{value:.2f}" for value in fitted)
            line += "  train images scored as validation " + " ".join(f"{value:.2f}" for value in kept)
        print(line, flush=True)


if __name__ == "__main__":
    main()
