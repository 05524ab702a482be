"""JPEGs whose parts decode on their own: restart markers (`ddptrain shard --restart-markers`).

A JPEG's image data is one entropy-coded stream: to reach a training crop's region a decoder must read every block
before it, and every block beside it in the same rows. A restart marker resets the stream, so the data between two
markers decodes alone. With a marker every few MCUs (every 4 here: 64 pixels of a 4:2:0 photo) and every row
starting a segment, the compiled region decoder reads only the segments a crop's region lies in (`_jpegregion`).

The rewrite is lossless: the same DCT coefficients, so the same pixels from any decoder; the Huffman tables are
made for the image (optimised), which usually more than pays for the markers' bytes. EXIF and the other
application segments are kept, so the orientation is too.
"""

from __future__ import annotations

from typing import Optional

from ..errors import ConfigError
from .images import UNREADABLE_ERRORS, ImageLimits, image_geometry, region_decoder

RESTART_MCUS = 4  # at most this many MCUs between two markers (fewer where a row's MCUs do not divide by it)


def with_restart_markers(data: bytes, limits: ImageLimits = ImageLimits(), mcus: int = RESTART_MCUS) -> Optional[bytes]:
    """`data` rewritten losslessly with a restart marker every `mcus` MCUs or fewer; None to keep it as it is: not
    a colour or grayscale JPEG, over `limits`, damaged (the loader then gives it its usual verdict), or ddptrain
    was installed without its compiled decoder (`available`)."""
    module = region_decoder()
    if module is None or data[:2] != b"\xff\xd8":
        return None
    try:
        image_geometry(data, limits)
    except UNREADABLE_ERRORS:
        return None
    return module.restart(data, mcus)


def available() -> bool:
    """Whether this install can write restart markers (its compiled decoder is built)."""
    return region_decoder() is not None


def require() -> None:
    """--restart-markers refused in one line where this install cannot write them."""
    if not available():
        raise ConfigError(
            "--restart-markers: ddptrain was installed without its compiled JPEG decoder, which writes them (a C "
            "compiler and libjpeg-turbo's headers, e.g. Debian's libjpeg62-turbo-dev, then reinstall); leave the "
            "flag out"
        )
