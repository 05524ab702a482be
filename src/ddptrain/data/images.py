"""Open any image file as 8-bit RGB, or fail with an error that names the file."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

import numpy as np
from PIL import Image

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"})

# Errors that mean "this file is not a usable image"; anything else is a bug and propagates.
UNREADABLE_ERRORS = (OSError, ValueError, SyntaxError, Image.DecompressionBombError, EOFError)

_HIGH_BIT_MODES = {"I;16", "I;16B", "I;16L", "I;16N", "I", "F"}
_ALPHA_MODES = {"RGBA", "LA", "PA", "RGBa", "La"}


def is_image_file(path: Union[str, Path]) -> bool:
    name = Path(path).name
    return not name.startswith(".") and Path(name).suffix.lower() in IMAGE_EXTENSIONS


def open_rgb(path: Union[str, Path], min_side: Optional[int] = None) -> Image.Image:
    """Decode `path` to an RGB image.

    `min_side` lets the JPEG decoder scale down by 1/2, 1/4 or 1/8 while keeping the shorter side
    at least that long: the later crop or resize then sees the same geometry at a resolution still
    at or above its output size, for a fraction of the decoding work.
    """
    with Image.open(path) as img:
        if min_side and img.format == "JPEG":
            img.draft("RGB", (min_side, min_side))
        img.load()  # decode now, inside the caller's error handling, so truncation surfaces here
        return to_rgb(img)


def to_rgb(img: Image.Image) -> Image.Image:
    """Convert every PIL mode to RGB: 16-bit and float scaled to 8 bits, transparency over white."""
    if img.mode == "RGB":
        return img
    if img.mode in _HIGH_BIT_MODES:
        return Image.fromarray(_to_uint8(np.asarray(img), img.mode)).convert("RGB")
    if img.mode == "P" and "transparency" in img.info:
        img = img.convert("RGBA")
    if img.mode in _ALPHA_MODES:
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return img.convert("RGB")


def _to_uint8(values: np.ndarray, mode: str) -> np.ndarray:
    values = values.astype(np.float64)
    hi = float(values.max(initial=0))
    if mode.startswith("I;16") or (mode == "I" and 255 < hi <= 65535):
        return (values / 257.0).round().astype(np.uint8)  # 16-bit range to 8-bit
    if mode == "F" and 0.0 <= float(values.min(initial=0)) and hi <= 1.0:
        return (values * 255.0).round().astype(np.uint8)
    lo = float(values.min(initial=0))
    if lo >= 0 and hi <= 255:
        return values.round().astype(np.uint8)
    scale = 255.0 / (hi - lo) if hi > lo else 0.0
    return ((values - lo) * scale).round().astype(np.uint8)
