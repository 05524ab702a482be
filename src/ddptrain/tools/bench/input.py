"""`ddptrain bench input`: images/s per CPU core of the tutorial's input pipeline vs ddptrain's.

Both run in this one process on one thread (so images/s is images/s per core), on the same files,
batch by batch in alternation, with a 224 px RandomResizedCrop + horizontal flip:

- seed (the tutorial): PIL open -> torchvision RandomResizedCrop -> ToTensor -> Normalize, per image;
- ddptrain: ImageDataset (libjpeg-turbo straight to a uint8 tensor, or JPEG draft decoding when the
  source is much larger than needed; crop, resize and flip in uint8) -> collate to a uint8 batch ->
  to the device -> normalise the whole batch there. The figure counts
  every step up to the normalised float tensor on the device, wherever each step runs.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Callable, List, Optional

import torch

from ...data.datasets import ImageDataset, collate
from ...data.transforms import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    Augment,
    Preprocess,
    normalize,
    train_decode_min_side,
    train_transform,
)
from .photos import write_photos

BATCH = 32


def seed_pipeline(size: int) -> Callable[[str], torch.Tensor]:
    from PIL import Image
    from torchvision import transforms

    transform = transforms.Compose(
        [
            transforms.RandomResizedCrop(size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )

    def load(path: str) -> torch.Tensor:
        with open(path, "rb") as handle:
            return transform(Image.open(handle).convert("RGB"))

    return load


def _seed_batch(load, files: List[str], device: torch.device) -> None:
    torch.stack([load(path) for path in files]).to(device)


def _ddptrain_batch(dataset: ImageDataset, first: int, count: int, device: torch.device) -> None:
    batch = collate([dataset[(index, 0)] for index in range(first, first + count)])
    normalize(batch.images.to(device, non_blocking=True))


def _gpu_decode_batch(files: List[str], size: int, device: torch.device, transform) -> None:
    """nvJPEG: the files' bytes go to the GPU, which decodes the batch and crops, resizes, flips and
    normalises there; the CPU only reads files."""
    from torchvision.io import ImageReadMode, decode_jpeg

    data = [torch.frombuffer(bytearray(Path(path).read_bytes()), dtype=torch.uint8) for path in files]
    images = decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
    normalize(torch.stack([transform(image) for image in images]))


def _time_gpu_decode(files: List[str], size: int, device: torch.device) -> float:
    transform = train_transform(size, 0.08)
    start = time.perf_counter()
    for first in range(0, len(files), BATCH):
        _gpu_decode_batch(files[first : first + BATCH], size, device, transform)
    _sync(device)
    return time.perf_counter() - start


def _time_both(files: List[str], size: int, device: torch.device, augment: Augment = Augment()) -> tuple:
    """Seconds for the seed and the ddptrain pipeline over all files, alternating batch by batch so
    that the machine's drifting load falls on both alike."""
    load = seed_pipeline(size)
    dataset = ImageDataset(
        [(path, 0) for path in files],
        train_transform(size, 0.08, Preprocess(), augment),
        train_decode_min_side(size, 0.08),
        seed=0,
        substitute=True,
    )
    seed_s = ours_s = 0.0
    for first in range(0, len(files), BATCH):
        count = min(BATCH, len(files) - first)
        start = time.perf_counter()
        _seed_batch(load, files[first : first + count], device)
        _sync(device)
        middle = time.perf_counter()
        _ddptrain_batch(dataset, first, count, device)
        _sync(device)
        seed_s += middle - start
        ours_s += time.perf_counter() - middle
    return seed_s, ours_s


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_input_bench(
    data: Optional[str], count: int, size: int, rounds: int, device_kind: str, policy: Optional[str] = None
) -> dict:
    device = torch.device(
        "cuda" if device_kind == "cuda" or (device_kind == "auto" and torch.cuda.is_available()) else "cpu"
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one core: the figures are per core
    try:
        with tempfile.TemporaryDirectory(prefix="ddptrain-bench-") as tmp:
            root = Path(data) if data else write_photos(Path(tmp) / "photos", count)
            files = sorted(str(p) for p in root.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg"))[:count]
            if not files:
                raise FileNotFoundError(f"no JPEG files under {root}")
            augment = Augment(policy)
            _time_both(files[:BATCH], size, device, augment)  # warm the page cache and the code paths
            seed_s = ours_s = 0.0
            for _ in range(rounds):
                seed_round, ours_round = _time_both(files, size, device, augment)
                seed_s, ours_s = seed_s + seed_round, ours_s + ours_round
            gpu_seconds = 0.0
            if device.type == "cuda":
                _time_gpu_decode(files[:BATCH], size, device)
                gpu_seconds = sum(_time_gpu_decode(files, size, device) for _ in range(rounds))
    finally:
        torch.set_num_threads(threads)
    images = len(files) * rounds
    result = {
        "seed_images_per_sec_per_core": images / seed_s,
        "ddptrain_images_per_sec_per_core": images / ours_s,
        "ratio": seed_s / ours_s,
    }
    if gpu_seconds:
        result["ddptrain_gpu_decode_images_per_sec_per_core"] = images / gpu_seconds
        result["gpu_decode_ratio"] = seed_s / gpu_seconds
    return {
        **result,
        "images": len(files),
        "img_size": size,
        "device": str(device),
        "rounds": rounds,
        "auto_augment": policy,
        "source": data or "generated 500x375 JPEGs, quality 90",
    }
