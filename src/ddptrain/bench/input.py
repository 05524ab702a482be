"""`ddptrain bench input`: images/s per CPU core of the tutorial's input pipeline vs ddptrain's.

Both run in this one process on one thread (so images/s is images/s per core), on the same files,
with a 224 px RandomResizedCrop + horizontal flip:

- seed (the tutorial): PIL open -> torchvision RandomResizedCrop -> ToTensor -> Normalize, per image;
- ddptrain: ImageDataset (JPEG draft decoding when the source is large, crop, resize and flip in uint8)
  -> collate to a uint8 batch -> to the device -> normalise the whole batch there. The figure counts
  every step up to the normalised float tensor on the device, wherever each step runs.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Callable, List, Optional

import torch

from ..data.datasets import ImageDataset, collate
from ..data.transforms import IMAGENET_MEAN, IMAGENET_STD, normalize, train_decode_min_side, train_transform
from .photos import write_photos

BATCH = 32


def seed_pipeline(size: int) -> Callable[[str], torch.Tensor]:
    from PIL import Image
    from torchvision import transforms

    transform = transforms.Compose([transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
                                    transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)])

    def load(path: str) -> torch.Tensor:
        with open(path, "rb") as handle:
            return transform(Image.open(handle).convert("RGB"))

    return load


def _time_seed(files: List[str], size: int, device: torch.device) -> float:
    load = seed_pipeline(size)
    start = time.perf_counter()
    for first in range(0, len(files), BATCH):
        batch = torch.stack([load(path) for path in files[first:first + BATCH]])
        batch.to(device)
    _sync(device)
    return len(files) / (time.perf_counter() - start)


def _time_ddptrain(files: List[str], size: int, device: torch.device) -> float:
    dataset = ImageDataset([(path, 0) for path in files], train_transform(size, 0.08),
                           train_decode_min_side(size, 0.08), seed=0, substitute=True)
    start = time.perf_counter()
    for first in range(0, len(files), BATCH):
        batch = collate([dataset[(index, 0)] for index in range(first, min(first + BATCH, len(files)))])
        normalize(batch.images.to(device, non_blocking=True))
    _sync(device)
    return len(files) / (time.perf_counter() - start)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_input_bench(data: Optional[str], count: int, size: int, rounds: int, device_kind: str) -> dict:
    device = torch.device("cuda" if device_kind == "cuda" or (device_kind == "auto" and torch.cuda.is_available())
                          else "cpu")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one core: the figures are per core
    try:
        with tempfile.TemporaryDirectory(prefix="ddptrain-bench-") as tmp:
            root = Path(data) if data else write_photos(Path(tmp) / "photos", count)
            files = sorted(str(p) for p in root.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg"))[:count]
            if not files:
                raise FileNotFoundError(f"no JPEG files under {root}")
            _time_seed(files[:BATCH], size, device)  # warm the page cache and the code paths
            _time_ddptrain(files[:BATCH], size, device)
            seed, ours = [], []
            for _ in range(rounds):  # alternate so drifting machine load hits both alike
                seed.append(_time_seed(files, size, device))
                ours.append(_time_ddptrain(files, size, device))
    finally:
        torch.set_num_threads(threads)
    best_seed, best_ours = max(seed), max(ours)
    return {"seed_images_per_sec_per_core": best_seed, "ddptrain_images_per_sec_per_core": best_ours,
            "ratio": best_ours / best_seed, "images": len(files), "img_size": size, "device": str(device),
            "rounds": rounds, "source": data or "generated 500x375 JPEGs, quality 90"}
