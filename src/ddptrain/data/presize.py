"""Pre-sized images for shard sets (`ddptrain shard --max-side N --quality Q`): an image whose longer side is over N
is re-encoded once, as a JPEG of quality Q with that side N, so that every epoch after decodes a few hundred pixels a
side instead of a camera's thousands. Images within the size are stored as they are, byte for byte."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Optional, Tuple

from PIL import Image

from ..errors import ConfigError, DataError
from .images import UNREADABLE_ERRORS, ImageLimits, image_geometry, open_upright, upright_size

DEFAULT_QUALITY = 90


@dataclass(frozen=True)
class Presize:
    max_side: int
    quality: int = DEFAULT_QUALITY

    def target(self, width: int, height: int) -> Optional[Tuple[int, int]]:
        """The (width, height) an image of this size is re-encoded at; None when it is within the size."""
        longest = max(width, height)
        if longest <= self.max_side:
            return None
        scale = self.max_side / longest
        return max(1, round(width * scale)), max(1, round(height * scale))

    def apply(self, data: bytes, limits: ImageLimits = ImageLimits()) -> Optional[bytes]:
        """The re-encoded JPEG; None to keep `data` as it is: within the size, or not readable (the loader skips
        and counts such an image as it would have before). A re-encoded image is stored upright: its EXIF
        orientation, which the new file does not carry, is applied to the pixels."""
        try:
            width, height, orientation = image_geometry(data, limits)
            target = self.target(*upright_size(width, height, orientation))
            if target is None:
                return None
            # DCT-scaled decoding down to at least the target (JPEG), then an antialiased resize to it
            image = open_upright(data, min(target), limits)
            resized = image.resize(target, Image.Resampling.LANCZOS)
        except UNREADABLE_ERRORS:
            return None
        out = io.BytesIO()
        resized.save(out, format="JPEG", quality=self.quality)
        return out.getvalue()

    def record(self) -> dict:
        return {"max_side": self.max_side, "quality": self.quality}


def recorded_side(made_with: dict, given: Optional[int], data: str) -> Optional[int]:
    """The longest side a run records (`data_max_side`) for data made `made_with` (a shard set's index facts): the
    set's --max-side; a run that names a side refuses data made otherwise."""
    record = made_with.get("presized") or {}
    made = record.get("max_side") if isinstance(record, dict) else None
    if record and not (isinstance(made, int) and not isinstance(made, bool) and made > 0):
        raise DataError(
            f"{data}: its index says it was pre-sized as {str(record)[:80]!r}, not a longest side in pixels; the "
            "index is damaged: re-make the set with `ddptrain shard --max-side N`"
        )
    if given is not None and given != made:
        made_as = f"made with --max-side {made}" if made else "not pre-sized (`ddptrain shard --max-side`)"
        raise ConfigError(
            f"--data-max-side {given}: {data} is {made_as}; make the shards with --max-side {given}, or leave "
            "--data-max-side out"
        )
    return None if made is None else int(made)
