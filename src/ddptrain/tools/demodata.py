"""The embedded demo dataset: photo-like JPEGs of coloured shapes on cluttered backgrounds.

Deterministic: the same arguments give the same bytes (every random draw comes from a numpy
generator keyed by (seed, class, image)). Classes differ only by the shape's outline; colour,
size, position, rotation, background, clutter, blur, noise and JPEG quality vary within every
class, so colour or position alone does not give the answer.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor
from io import BytesIO
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
from PIL import Image, ImageDraw, ImageFilter
from tqdm import tqdm

from ..errors import ConfigError
from ..runtime.env import available_cpus
from . import PER_CLASS

MARKER = ".ddptrain-dataset.json"


def _regular(n: int, start: float = 0.0) -> List[Tuple[float, float]]:
    return [(math.cos(start + 2 * math.pi * k / n), math.sin(start + 2 * math.pi * k / n)) for k in range(n)]


def _star(points: int = 5, inner: float = 0.45) -> List[Tuple[float, float]]:
    outline = []
    for k in range(2 * points):
        radius = 1.0 if k % 2 == 0 else inner
        angle = math.pi * k / points - math.pi / 2
        outline.append((radius * math.cos(angle), radius * math.sin(angle)))
    return outline


def _cross(arm: float = 0.36) -> List[Tuple[float, float]]:
    a = arm
    return [(-a, -1), (a, -1), (a, -a), (1, -a), (1, a), (a, a), (a, 1), (-a, 1), (-a, a), (-1, a), (-1, -a), (-a, -a)]


# Each shape is a list of (outline, fill) pairs in unit coordinates, drawn in order onto a mask:
# fill 255 adds to the object, 0 cuts a hole through which the background shows.
SHAPES: Dict[str, List[Tuple[List[Tuple[float, float]], int]]] = {
    "disc": [(_regular(48), 255)],
    "ring": [(_regular(48), 255), ([(0.55 * x, 0.55 * y) for x, y in _regular(48)], 0)],
    "square": [(_regular(4, math.pi / 4), 255)],
    "star": [(_star(), 255)],
    "triangle": [(_regular(3, -math.pi / 2), 255)],
    "cross": [(_cross(), 255)],
    "hexagon": [(_regular(6), 255)],
    "crescent": [(_regular(48), 255), ([(x + 0.55, y - 0.1) for x, y in _regular(48)], 0)],
}
CLASS_ORDER = ["disc", "ring", "star", "cross", "triangle", "square", "hexagon", "crescent"]


def _smooth_noise(rng: np.random.Generator, size: Tuple[int, int], cells: int) -> np.ndarray:
    """Low-frequency colour texture: a small random grid upsampled bicubically."""
    grid = (rng.random((cells, cells, 3)) * 255).astype(np.uint8)
    return np.asarray(Image.fromarray(grid).resize(size, Image.Resampling.BICUBIC), dtype=np.float32)


def _background(rng: np.random.Generator, size: Tuple[int, int]) -> Image.Image:
    w, h = size
    base = (rng.random(3) * 255).astype(np.float32)
    tint = (rng.random(3) * 255).astype(np.float32)
    ramp = np.linspace(0, 1, w, dtype=np.float32)[None, :, None]
    gradient = base * (1 - ramp) + tint * ramp  # (1, w, 3), broadcast over rows below
    texture = _smooth_noise(rng, size, int(rng.integers(3, 9)))
    pixels = np.float32(0.8) * gradient + np.float32(0.2) * texture
    image = Image.fromarray(pixels.astype(np.uint8))
    _clutter(rng, image)
    return image


def _clutter(rng: np.random.Generator, image: Image.Image) -> None:
    """Thin lines and small specks: distractors smaller and thinner than any class shape."""
    draw = ImageDraw.Draw(image)
    w, h = image.size
    for _ in range(int(rng.integers(3, 9))):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        if rng.random() < 0.6:
            xy = [float(v) for v in (rng.random(4) * [w, h, w, h])]
            draw.line(xy, fill=colour, width=int(rng.integers(1, 3)))
        else:
            cx, cy, r = rng.random() * w, rng.random() * h, rng.uniform(2, 0.03 * min(w, h))
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=colour)


def _object_colour(rng: np.random.Generator, background_mean: np.ndarray) -> Tuple[int, int, int]:
    for _ in range(32):
        colour = rng.integers(0, 256, 3)
        if np.abs(colour - background_mean).sum() > 200:
            break
    return int(colour[0]), int(colour[1]), int(colour[2])


def _shape_mask(rng: np.random.Generator, shape: str, size: Tuple[int, int]) -> Image.Image:
    w, h = size
    radius = rng.uniform(0.28, 0.42) * min(w, h)
    cx = rng.uniform(radius, w - radius)
    cy = rng.uniform(radius, h - radius)
    angle = rng.uniform(0, 2 * math.pi)
    stretch = rng.uniform(0.85, 1.0)
    cos, sin = math.cos(angle), math.sin(angle)
    supersample = 2
    mask = Image.new("L", (w * supersample, h * supersample), 0)
    draw = ImageDraw.Draw(mask)
    for outline, fill in SHAPES[shape]:
        points = []
        for x, y in outline:
            x, y = x * radius, y * radius * stretch
            points.append(((cx + x * cos - y * sin) * supersample, (cy + x * sin + y * cos) * supersample))
        draw.polygon(points, fill=fill)
    return mask.resize(size, Image.Resampling.BILINEAR)  # anti-aliased edges


def render_image(seed: int, class_index: int, image_index: int, shape: str) -> bytes:
    rng = np.random.default_rng([seed, class_index, image_index])
    size = (int(rng.integers(240, 501)), int(rng.integers(240, 501)))
    image = _background(rng, size)
    colour = _object_colour(rng, np.asarray(image, dtype=np.float32).mean(axis=(0, 1)))
    shading = Image.fromarray(
        np.clip(_smooth_noise(rng, size, 4) * 0.15 + np.array(colour) * 0.85, 0, 255).astype(np.uint8)
    )
    image.paste(shading, (0, 0), _shape_mask(rng, shape, size))
    if rng.random() < 0.5:
        image = image.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.3, 1.0))))
    sigma = np.float32(rng.uniform(2, 9))
    pixels = np.asarray(image, dtype=np.float32) + sigma * rng.standard_normal((size[1], size[0], 3), np.float32)
    image = Image.fromarray(np.clip(pixels, 0, 255, out=pixels).astype(np.uint8))
    buffer = BytesIO()
    image.save(buffer, format="JPEG", quality=int(rng.integers(70, 96)))
    return buffer.getvalue()


def make_dataset(
    out: str | Path, classes: int = 5, per_class: int = PER_CLASS, seed: int = 0, progress: bool = True
) -> Path:
    """Write out/<class>/<class>_NNNN.jpg and a marker describing how it was made."""
    if not 2 <= classes <= len(CLASS_ORDER):
        raise ConfigError(f"--classes must be between 2 and {len(CLASS_ORDER)}")
    if per_class < 1:
        raise ConfigError("--per-class must be at least 1")
    out = Path(out)
    _claim(out, classes * per_class, dataset_spec(classes, per_class, seed))
    names = CLASS_ORDER[:classes]
    for name in names:
        (out / name).mkdir(parents=True, exist_ok=True)
    jobs = [
        (seed, ci, i, name, str(out / name / f"{name}_{i:04d}.jpg"))
        for ci, name in enumerate(names)
        for i in range(per_class)
    ]
    workers = min(available_cpus(), 8)
    with ProcessPoolExecutor(workers) if workers > 1 else _InProcess() as pool:
        done = pool.map(_write_one, jobs, chunksize=16)
        for _ in tqdm(
            done, total=len(jobs), desc="make-dataset", unit="img", disable=not (progress and sys.stderr.isatty())
        ):
            pass
    (out / MARKER).write_text(json.dumps(dataset_spec(classes, per_class, seed)) + "\n")
    return out


BYTES_PER_IMAGE = 40_000  # the JPEGs average about 24 kB; kept above that so a nearly full disk is refused, not filled


def _claim(out: Path, images: int, spec: dict) -> None:
    """Refuse an --out that is a file, that holds what make-dataset did not write (`$HOME`, a project folder), or whose
    disk cannot take the images; otherwise mark it as make-dataset's before the first image, so that a run cut short
    can be re-run into the same folder."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is not a folder: give a new or empty folder to write the images into")
    if out.is_dir() and any(out.iterdir()) and not _written_here(out):
        raise ConfigError(
            f"--out {out} already holds files that make-dataset did not write: give a new or empty folder "
            "(make-dataset writes one sub-folder of JPEGs per class there)"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(
            f"--out {out}: cannot make the folder ({error.strerror or error}): give a folder you can write"
        ) from error
    need, free = images * BYTES_PER_IMAGE, shutil.disk_usage(out).free
    if need > free:
        raise ConfigError(
            f"--out {out}: {images:,} images need about {need / 1e9:.1f} GB and {free / 1e9:.1f} GB are free there: "
            "lower --per-class or --classes, or write elsewhere"
        )
    (out / MARKER).write_text(json.dumps({**spec, "complete": False}) + "\n")


def _written_here(out: Path) -> bool:
    """The folder's marker says make-dataset made it (complete or cut short)."""
    try:
        return json.loads((out / MARKER).read_text()).get("generator") == dataset_spec(2, 1, 0)["generator"]
    except (OSError, ValueError, AttributeError):
        return False


def _write_one(job: Tuple[int, int, int, str, str]) -> None:
    seed, class_index, image_index, shape, path = job
    Path(path).write_bytes(render_image(seed, class_index, image_index, shape))


class _InProcess:
    """Stand-in for a process pool on a one-core machine."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, fn, items, chunksize=1):
        return map(fn, items)


def dataset_spec(classes: int, per_class: int, seed: int) -> dict:
    return {"generator": "ddptrain-shapes-v1", "classes": classes, "per_class": per_class, "seed": seed}


def dataset_is_complete(out: str | Path, classes: int, per_class: int, seed: int) -> bool:
    marker = Path(out) / MARKER
    try:
        return json.loads(marker.read_text()) == dataset_spec(classes, per_class, seed)
    except (OSError, ValueError):
        return False
