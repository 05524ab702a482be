"""Photo-sized JPEGs for input benchmarks (about 500x375, quality 90), made on the spot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter


def photo(rng: np.random.Generator, width: int = 500, height: int = 375) -> Image.Image:
    """Smooth colour fields, shapes and sensor-like noise: compresses like a photograph (tens of KB at
    quality 90), unlike flat synthetic drawings."""
    coarse = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    image = Image.fromarray(coarse).resize((width, height), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(image)
    for _ in range(6):
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        r = int(rng.integers(20, 120))
        draw.ellipse([x - r, y - r, x + r, y + r], fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    image = image.filter(ImageFilter.GaussianBlur(1.5))
    noisy = np.asarray(image).astype(np.int16) + rng.normal(0, 9, (height, width, 3)).astype(np.int16)
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


def write_photos(folder: Path, count: int, classes: int = 4, seed: int = 0, jobs: int = 1) -> Path:
    """`count` photos in `classes` class folders. With jobs > 1, that many processes write interleaved slices
    (each from its own random stream: other pictures than jobs=1 makes, as many and as large)."""
    if jobs <= 1:
        _write_slice(folder, count, classes, np.random.default_rng(seed), 0, 1)
        return folder
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs) as pool:
        slices = [pool.submit(_write_slice_seeded, folder, count, classes, seed, job, jobs) for job in range(jobs)]
        for done in slices:
            done.result()
    return folder


def _write_slice_seeded(folder: Path, count: int, classes: int, seed: int, job: int, jobs: int) -> None:
    _write_slice(folder, count, classes, np.random.default_rng([seed, job]), job, jobs)


def _write_slice(folder: Path, count: int, classes: int, rng: np.random.Generator, first: int, step: int) -> None:
    for index in range(first, count, step):
        target = folder / f"class{index % classes}"
        target.mkdir(parents=True, exist_ok=True)
        photo(rng).save(target / f"photo_{index:05d}.jpg", quality=90)
