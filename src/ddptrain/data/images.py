"""Open any image file as 8-bit RGB, or fail with an error that names the file."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import io
import os
import re
import stat
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Iterator, Literal, Optional, Sequence, Tuple, Union

import numpy as np
from PIL import Image, UnidentifiedImageError

from ..config import DataConfig
from ..util import counted, one_line

if TYPE_CHECKING:
    import torch

# .jfif and .jpe are JPEG files by other names (what browsers on Windows save): decoded by their content, as all.
IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".jfif", ".jpe", ".png", ".bmp", ".webp", ".tif", ".tiff"})
EXTENSIONS_NAMED = " ".join(sorted(e[1:] for e in IMAGE_EXTENSIONS))  # for messages: "bmp jfif jpe jpeg ..."
# Pictures a folder of images often holds besides those (a phone's HEIC, a GIF, a camera's raw file, a scanner's
# JPEG 2000, a hospital's DICOM, a graphics tool's TGA or PSD): a listing leaves them out, counts them and says so
# (index.scan_images), rather than pass over them in silence.
OTHER_PICTURE_EXTENSIONS = frozenset(
    {".gif", ".apng", ".heic", ".heif", ".avif", ".avifs", ".jxl", ".ppm", ".pgm", ".pbm", ".pnm", ".ico", ".svg"}
    | {".dng", ".cr2", ".nef", ".arw", ".jp2", ".j2k", ".jpx", ".jpf", ".mpo", ".tga", ".psd", ".dds", ".pcx"}
    | {".qoi", ".exr", ".hdr", ".dcm", ".fits", ".eps"}
)

ORIENTATION_TAG = 0x0112  # EXIF: how the stored pixels turn to be shown upright (1: as stored)
XMP_HEADER = b"http://ns.adobe.com/xap/1.0/\x00"  # an APP1 segment holding an XMP packet
_XMP_ORIENTATION = re.compile(rb'tiff:Orientation(="|>)([0-9])')  # as PIL reads it when EXIF has no tag
PIL_TRANSPOSE = {  # the same turns as PIL's ImageOps.exif_transpose
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}

# Errors that mean "this file is not a usable image"; anything else is a bug and propagates.
UNREADABLE_ERRORS = (OSError, ValueError, SyntaxError, Image.DecompressionBombError, EOFError)


class NotAnImageError(ValueError):
    """The file's content is no image format Pillow knows (text, a PDF, an empty file, ...)."""


class NotARegularFile(ValueError):
    """A path that names a FIFO, a device, a socket or a folder: never opened for reading as an image."""


def describe_unreadable(error: BaseException) -> str:
    """What went wrong with one file, in words a user can act on."""
    if isinstance(error, (NotAnImageError, ImageTooLarge, NotARegularFile)):  # their messages say it all
        return str(error)
    return f"{type(error).__name__}: {error}"


_HIGH_BIT_MODES = {"I;16", "I;16B", "I;16L", "I;16N", "I", "F"}
_ALPHA_MODES = {"RGBA", "LA", "PA", "RGBa", "La"}


@dataclass(frozen=True)
class ImageLimits:
    """What a file may be before it is decoded: beyond these it is skipped and counted like any unreadable file.
    The pixel cap sits well below PIL's own warning (89 Mpx) and error (178 Mpx) thresholds: a worker that
    decodes a 178-Mpx image holds over half a gigabyte for it."""

    max_pixels: int = 64_000_000
    max_bytes: int = 128 * 2**20  # never read into memory beyond this

    @property
    def max_mb(self) -> float:
        return self.max_bytes / 2**20

    @classmethod
    def of(cls, data: DataConfig) -> ImageLimits:
        return cls(data.max_image_pixels, int(data.max_image_mb * 2**20))


class ImageTooLarge(ValueError):
    """Over an ImageLimits cap."""


def is_image_file(path: Union[str, Path]) -> bool:
    name = Path(path).name
    return not name.startswith(".") and Path(name).suffix.lower() in IMAGE_EXTENSIONS


def is_other_picture(path: Union[str, Path]) -> bool:
    """A picture in a format a folder listing does not take (OTHER_PICTURE_EXTENSIONS)."""
    name = Path(path).name
    return not name.startswith(".") and Path(name).suffix.lower() in OTHER_PICTURE_EXTENSIONS


def left_out_pictures(where: Union[str, Path], names: Sequence[str]) -> str:
    """One line for what a listing of `where` left out (`names` relative to it): pictures in other formats, and
    entries named as images that are not regular files (index.scan_images) — how many of each kind, a few of
    them, the fix."""
    unread = [name for name in names if is_image_file(name)]  # listed only when not a regular file
    pictures = [name for name in names if not is_image_file(name)]
    said = [_other_formats(pictures)] if pictures else []
    if unread:
        said.append(_not_regular(where, unread))
    return f"{where}: " + "; ".join(said)


def _other_formats(names: Sequence[str]) -> str:
    kinds = Counter(Path(name).suffix.lower() for name in names)
    verb, them = ("is", "it") if len(names) == 1 else ("are", "them")
    return (
        f"{counted(len(names), 'picture')} in a format ddptrain does not read from folders {verb} left out "
        f"({_tally(kinds, names)}); convert {them} to JPEG or PNG to use {them} (read: {EXTENSIONS_NAMED})"
    )


def _not_regular(where: Union[str, Path], names: Sequence[str]) -> str:
    """Image names that are broken links, FIFOs, devices or sockets: a data set whose files are links into a
    store (git-annex, DVC) not yet fetched is a folder of broken links."""
    kinds = Counter(file_kind(Path(where) / name).removeprefix("a ") for name in names)
    one = len(names) == 1
    what = "file named as an image is not a regular file" if one else "files named as images are not regular files"
    fix = f"put the image file{'' if one else 's'} there to use {'it' if one else 'them'}"
    if "broken link" in kinds:
        fix = "a broken link is often a file of a git-annex or DVC store not fetched yet (git annex get, dvc pull)"
    return f"{len(names)} {what} and {'is' if one else 'are'} left out ({_tally(kinds, names)}); {fix}"


def _tally(kinds: Counter, names: Sequence[str]) -> str:
    """'2 .heic, 1 .gif: a.heic, b.heic, c.gif': each kind's count, then the first three names."""
    each = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda item: (-item[1], item[0])))
    return f"{each}: " + ", ".join(one_line(name) for name in sorted(names)[:3]) + (", ..." if len(names) > 3 else "")


def not_read(kind: str) -> str:
    """What is said of an entry that is not a regular file (`kind`: 'a FIFO', 'a broken link (to ...)', ...)."""
    return f"{kind}, not a regular file; not read"


def file_kind(path: Union[str, Path]) -> str:
    """What a path that is not a regular file is: 'a broken link', 'a FIFO', 'a character device', ..."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a broken link" if os.path.islink(path) else "a missing file"
    except OSError as error:
        return f"unreadable ({error.strerror})"
    return _kind_of(mode)


def _kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_rgb(
    path: Union[str, Path, BinaryIO],
    min_side: Optional[int] = None,
    limits: ImageLimits = ImageLimits(),
    reduce: int = 1,
) -> Image.Image:
    """Decode `path` to an RGB image.

    `min_side` lets the JPEG decoder scale down by 1/2, 1/4 or 1/8 while keeping the shorter side
    at least that long: the later crop or resize then sees the same geometry at a resolution still
    at or above its output size, for a fraction of the decoding work. `reduce` (2, 4 or 8) asks for
    that factor directly (see crops.Box.reduction); other files than JPEGs decode at full size.

    Other files than JPEGs come out upright (their EXIF orientation applied, as Pillow itself does for TIFF as
    it loads); a JPEG's pixels as stored, for the crop to turn only its region (`image_geometry`; `open_upright`
    turns the whole picture).
    """
    with _pil_reading(limits), _pil_open(path) as img:
        _check_pixels(img.size[0], img.size[1], limits)  # from the header: nothing decoded yet
        known = pil_orientation(img) if img.format != "JPEG" else 1  # one found only as it loads is not applied
        if img.format == "JPEG" and (min_side or reduce > 1):
            width, height = img.size
            img.draft("RGB", (min_side, min_side) if min_side else (width // reduce, height // reduce))
        img.load()  # decode now, inside the caller's error handling, so truncation surfaces here
        left = pil_orientation(img) if known != 1 else 1  # Pillow may have turned it as it loaded (TIFF)
        return to_rgb(img.transpose(PIL_TRANSPOSE[left]) if left != 1 else img)


def _pil_open(source: Union[str, Path, BinaryIO]) -> Image.Image:
    try:
        return Image.open(source)
    except UnidentifiedImageError:
        raise NotAnImageError("not an image (no image format recognised in its content)") from None


_BOMB_PIXELS = re.compile(r"Image size \((\d+) pixels\)")


@contextlib.contextmanager
def _pil_reading(limits: ImageLimits) -> Iterator[None]:
    """Pillow reading one file for ddptrain: its size is judged by ddptrain's --max-image-pixels, not by Pillow's
    own decompression-bomb threshold (raised to it where the user raised the limit above Pillow's, never lowered),
    and Pillow's warnings about damaged files stay off the console — the file decodes, or it is skipped and counted
    with the reason."""
    _follow_raised_limit(limits)
    _quiet_libtiff()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module=r"PIL\.")
        try:
            yield
        except Image.DecompressionBombError as error:
            found = _BOMB_PIXELS.search(str(error))
            if found is None or int(found.group(1)) <= limits.max_pixels:
                raise  # a stricter limit someone set on Pillow in this process: its own words
            raise ImageTooLarge(
                f"{int(found.group(1)) / 1e6:,.0f} Mpx, over the --max-image-pixels limit of "
                f"{limits.max_pixels / 1e6:.0f} Mpx (a decompression bomb, or a scan too large to train on)"
            ) from None


@functools.cache
def _quiet_libtiff() -> None:
    """libtiff writes its warnings and errors about a damaged TIFF straight to stderr — hundreds of lines for one
    file with a mangled directory, again each time it is read — beside the one line ddptrain gives that file. Its
    handlers are set to none in this process (the library Pillow loaded, found in the process's memory map; Pillow
    still gets the error and ddptrain reports it). Where that cannot be done, nothing changes."""
    try:
        from PIL import _imaging  # noqa: F401 (loads the libtiff Pillow was built with)

        with open("/proc/self/maps") as maps:
            path = next(line.split()[-1] for line in maps if "/libtiff" in line)
        library = ctypes.CDLL(path)
        library.TIFFSetWarningHandler(None)
        library.TIFFSetErrorHandler(None)
    except (OSError, StopIteration, AttributeError, ImportError):
        return


PILLOW_DEFAULT_PIXELS = 1024 * 1024 * 1024 // 4 // 3  # Pillow's own threshold (89 Mpx), as it ships


def _follow_raised_limit(limits: ImageLimits) -> None:
    """Pillow's process-wide threshold raised to --max-image-pixels where the user raised that above Pillow's own
    (a stricter threshold set on Pillow in this process stands otherwise)."""
    if Image.MAX_IMAGE_PIXELS is not None and limits.max_pixels > max(Image.MAX_IMAGE_PIXELS, PILLOW_DEFAULT_PIXELS):
        Image.MAX_IMAGE_PIXELS = limits.max_pixels


def _check_pixels(width: int, height: int, limits: ImageLimits) -> None:
    if width * height > limits.max_pixels:
        raise ImageTooLarge(
            f"{width}x{height} = {width * height / 1e6:.0f} Mpx, over the --max-image-pixels limit of "
            f"{limits.max_pixels / 1e6:.0f} Mpx (a decompression bomb, or a scan too large to train on)"
        )


def load_rgb(
    path: Union[str, Path], min_side: Optional[int] = None, limits: ImageLimits = ImageLimits()
) -> Union[Image.Image, torch.Tensor]:
    """Decode `path` to RGB, the fastest correct way: a colour or grayscale JPEG that reduced decoding
    would not shrink goes straight to a uint8 CHW tensor through libjpeg-turbo (torchvision.io),
    skipping PIL's four-bytes-per-pixel copy and the conversion after it; every other file (PNG,
    CMYK JPEG, a JPEG large enough for draft decoding) and any JPEG that path refuses goes through
    PIL, as `open_rgb`. Transforms accept either."""
    return decode_rgb(read_image_file(path, limits), min_side, limits)


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_image_file(path: Union[str, Path], limits: ImageLimits) -> bytes:
    """A file's bytes, refusing what is not a regular file and never reading more than `limits.max_bytes`.

    The file is opened without blocking and checked on its open descriptor: a FIFO named `x.jpg` (which would
    block the reader for ever), `/dev/zero` (whose size reads 0 and which never ends) or a folder is refused
    before a byte is read, and a file that grows past the cap while it is read is cut off, not swallowed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if os.path.islink(path):  # a git-annex or DVC file not fetched: said as such, like a folder's listing
            raise NotARegularFile(not_read(f"a broken link (to {os.readlink(path)})")) from None
        raise
    try:
        mode = os.fstat(fd)
        if not stat.S_ISREG(mode.st_mode):
            raise NotARegularFile(not_read(_kind_of(mode.st_mode)))
        check_size(mode.st_size, limits)
        chunks, total = [], 0
        while total <= limits.max_bytes:
            chunk = os.read(fd, min(1 << 20, limits.max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        check_size(total, limits)
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_size(size: int, limits: ImageLimits) -> None:
    if size > limits.max_bytes:
        raise ImageTooLarge(
            f"{size / 2**20:.1f} MB file, over the --max-image-mb limit of {limits.max_mb:g} MB; not read"
        )


def decode_rgb(
    data: bytes, min_side: Optional[int] = None, limits: ImageLimits = ImageLimits(), reduce: int = 1
) -> Union[Image.Image, torch.Tensor]:
    """`load_rgb` for an image already in memory (read from a file or a shard); `reduce` as for `open_rgb`."""
    decode_jpeg = _jpeg_decoder()
    header = _jpeg_header(data) if decode_jpeg is not None else None
    if header is not None:
        width, height = header[0], header[1]
        _check_jpeg_pixels(width, height, limits)
        if header[2] in (1, 3) and reduce == 1 and not _draft_shrinks((width, height), min_side):
            try:
                return decode_jpeg(data)
            except RuntimeError:
                pass  # PIL decides: it gives broken files their usual error
    return open_rgb(io.BytesIO(data), min_side, limits, reduce)


def decode_region(data: bytes, reduce: int, top: int, left: int, bottom: int, right: int) -> Optional[torch.Tensor]:
    """Rows `top`..`bottom`, columns `left`..`right` of a JPEG decoded at 1/`reduce` (1, 2, 4, 8) of its size:
    a uint8 (3, h, w) view of channel-last pixels, equal to that region of a whole decode (libjpeg-turbo leaves
    out the other columns' inverse DCT and colour conversion and stops after the region's last row). None where
    it cannot: ddptrain was installed without its compiled decoder (no C compiler or libjpeg-turbo headers),
    `data` is not a colour or grayscale JPEG, or it is damaged — decode it whole, which gives it its usual verdict.
    A file that does not end with the end-of-image marker (cut short, or with bytes after the image) is left to
    the whole decode too: its region may lie before the cut, and the file must get the same verdict whatever its
    crop. The caller has checked the header against its limits (`image_size`)."""
    module = region_decoder()
    if module is None or data[:2] != b"\xff\xd8" or data[-2:] != b"\xff\xd9":
        return None
    decoded = module.decode(data, reduce, top, left, bottom, right)
    if decoded is None:
        return None
    import torch

    rgb, first, width = decoded
    pixels = torch.frombuffer(rgb, dtype=torch.uint8).view(bottom - top, width, 3)
    return pixels[:, left - first : right - first].permute(2, 0, 1)


@functools.cache
def region_decoder():
    """The compiled region decoder (`_jpegregion`, built at install where libjpeg-turbo's headers are), or None."""
    try:
        from . import _jpegregion  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _jpegregion


def image_size(data: bytes, limits: ImageLimits = ImageLimits()) -> Tuple[int, int]:
    """(width, height) of the pixels the decoders give (`image_geometry`), within `limits`. Raises as decoding
    would for what is not an image."""
    return image_geometry(data, limits)[:2]


def image_geometry(data: bytes, limits: ImageLimits = ImageLimits()) -> Tuple[int, int, int]:
    """(width, height, orientation): the size of the pixels the decoders give and the EXIF orientation (1-8) that
    still turns them the way viewers show the picture — a camera's portrait photo is often stored landscape with
    orientation 6 or 8. A JPEG's pixels are decoded as stored (its region alone is turned after the crop); other
    files are decoded upright (`open_rgb`), so their orientation is 1 and their size the upright one. Read from the
    header alone, within `limits` (a turned file of another format is decoded to learn its upright size)."""
    header = _jpeg_header(data)
    if header is not None:
        _check_jpeg_pixels(header[0], header[1], limits)
        return header[0], header[1], header[3]
    with _pil_reading(limits), _pil_open(io.BytesIO(data)) as img:
        _check_pixels(img.size[0], img.size[1], limits)
        orientation = pil_orientation(img)
        if img.format == "JPEG" or orientation == 1:
            return img.size[0], img.size[1], orientation
    # Turned, and not a JPEG (rare): Pillow turns some formats as it loads them and reports their size upright
    # before (TIFF), others not, and that differs between its versions; the decoded picture's size is upright.
    return (*open_rgb(io.BytesIO(data), limits=limits).size, 1)


def pil_orientation(img: Image.Image) -> int:
    """The EXIF orientation (1-8) of an opened image; 1 where it has none or an unreadable one."""
    try:
        value = img.getexif().get(ORIENTATION_TAG, 1)
    except Exception:  # PIL's EXIF reader raises many kinds on damaged data; the pixels may still be fine
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def upright_size(width: int, height: int, orientation: int) -> Tuple[int, int]:
    """(width, height) of a `width` x `height` stored image as shown upright (orientations 5-8 turn it a
    quarter)."""
    return (height, width) if orientation in (5, 6, 7, 8) else (width, height)


def orient(pixels: torch.Tensor, orientation: int) -> torch.Tensor:
    """Stored pixels (..., H, W) turned upright by their EXIF `orientation` (a view; PIL's exif_transpose)."""
    if orientation == 2:
        return pixels.flip(-1)
    if orientation == 3:
        return pixels.flip(-2, -1)
    if orientation == 4:
        return pixels.flip(-2)
    if orientation == 5:
        return pixels.transpose(-2, -1)
    if orientation == 6:
        return pixels.rot90(-1, (-2, -1))
    if orientation == 7:
        return pixels.transpose(-2, -1).flip(-2, -1)
    if orientation == 8:
        return pixels.rot90(1, (-2, -1))
    return pixels


def open_upright(data: bytes, min_side: Optional[int] = None, limits: ImageLimits = ImageLimits()) -> Image.Image:
    """`open_rgb` of an image in memory, turned the way training sees it (a JPEG by its header's orientation)."""
    image = open_rgb(io.BytesIO(data), min_side, limits)
    orientation = image_geometry(data, limits)[2]
    return image.transpose(PIL_TRANSPOSE[orientation]) if orientation != 1 else image


def decode_upright(data: bytes, limits: ImageLimits = ImageLimits()) -> Union[Image.Image, torch.Tensor]:
    """`decode_rgb` turned the way viewers show it (its EXIF orientation applied), for transforms that are not
    ddptrain's own (those orient the crop only: transforms.Prepare)."""
    image = decode_rgb(data, limits=limits)
    orientation = image_geometry(data, limits)[2]
    if orientation == 1:
        return image
    if isinstance(image, Image.Image):
        return image.transpose(PIL_TRANSPOSE[orientation])
    return orient(image, orientation)


def is_plain_jpeg(data: bytes) -> bool:
    """A colour or grayscale JPEG (not CMYK): what the GPU's decoder takes."""
    header = _jpeg_header(data)
    return header is not None and header[2] in (1, 3)


def _check_jpeg_pixels(width: int, height: int, limits: ImageLimits) -> None:
    if width < 1 or height < 1:  # a JPEG may leave its height to a later marker; we do not read such files
        raise NotAnImageError(f"{width}x{height} pixels in its JPEG header: nothing to decode")
    _check_pixels(width, height, limits)
    _follow_raised_limit(limits)
    if width * height > 2 * (Image.MAX_IMAGE_PIXELS or float("inf")):  # a stricter limit set on Pillow in this process
        raise Image.DecompressionBombError(
            f"{width}x{height} pixels: over twice PIL's limit of {Image.MAX_IMAGE_PIXELS}, could be a decompression bomb"
        )


_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start of frame: baseline, progressive, ...


def _jpeg_header(data: bytes) -> Optional[tuple]:
    """(width, height, colour components, orientation) from a JPEG's segments up to its start of frame; None if not
    a JPEG. The orientation is EXIF's, else (no tag in EXIF) the one the last XMP packet gives, as PIL reads it."""
    if data[:2] != b"\xff\xd8":
        return None
    at, exif, xmp = 2, None, None
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # markers without a length
            at += 2
            continue
        length = int.from_bytes(data[at + 2 : at + 4], "big")
        if marker == 0xE1:  # APP1: Exif or XMP
            segment = memoryview(data)[at + 4 : at + 2 + length]  # no copy
            if segment[: len(XMP_HEADER)] == XMP_HEADER:
                xmp = xmp_orientation(segment[len(XMP_HEADER) :])
            elif exif is None:
                exif = exif_orientation_tag(segment)
        if marker in _SOF_MARKERS:
            if at + 10 > len(data):
                return None
            height = int.from_bytes(data[at + 5 : at + 7], "big")
            width = int.from_bytes(data[at + 7 : at + 9], "big")
            orientation = exif if exif is not None else xmp
            return width, height, data[at + 9], orientation if orientation is not None and 1 <= orientation <= 8 else 1
        at += 2 + length
    return None


def exif_orientation_tag(segment: Union[bytes, memoryview]) -> Optional[int]:
    """The orientation tag's value in an APP1 segment's EXIF block (its TIFF header and first directory), whatever
    it is; None where there is no such tag, or the block is not EXIF, is cut short or points outside itself."""
    if segment[:6] != b"Exif\x00\x00" or len(segment) < 14:
        return None
    tiff = segment[6:]
    if tiff[:2] not in (b"II", b"MM"):
        return None
    order: Literal["little", "big"] = "little" if tiff[:2] == b"II" else "big"
    if int.from_bytes(tiff[2:4], order) != 42:
        return None
    directory = int.from_bytes(tiff[4:8], order)
    if directory + 2 > len(tiff):
        return None
    count = int.from_bytes(tiff[directory : directory + 2], order)
    for entry in range(directory + 2, min(directory + 2 + 12 * count, len(tiff) - 11), 12):
        if int.from_bytes(tiff[entry : entry + 2], order) == ORIENTATION_TAG:
            kind = int.from_bytes(tiff[entry + 2 : entry + 4], order)
            width = {3: 2, 4: 4}.get(kind, 0)  # a SHORT, as EXIF says, or a LONG, which PIL reads too
            return int.from_bytes(tiff[entry + 8 : entry + 8 + width], order) if width else 0
    return None


def xmp_orientation(packet: Union[bytes, memoryview]) -> Optional[int]:
    """The first `tiff:Orientation` digit of an XMP packet, in an attribute or an element (PIL's reading); None
    where there is none."""
    found = _XMP_ORIENTATION.search(packet)
    return int(found[2]) if found else None


def _draft_shrinks(size, min_side: Optional[int]) -> bool:
    return min_side is not None and min_side > 0 and min(size) >= 2 * min_side


@functools.cache
def _jpeg_decoder():
    """torchvision's libjpeg-turbo decoder, imported on first use (the command line lists data without torch)."""
    try:
        import torch
        from torchvision.io import ImageReadMode, decode_jpeg
    except ImportError:
        return None

    def decode(data: bytes) -> torch.Tensor:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torchvision >= 0.24 announces a future move of its decoders
            return decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8), mode=ImageReadMode.RGB)

    return decode


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
    if mode == "F" and float(values.min(initial=0)) >= 0.0 and hi <= 1.0:
        return (values * 255.0).round().astype(np.uint8)
    lo = float(values.min(initial=0))
    if lo >= 0 and hi <= 255:
        return values.round().astype(np.uint8)
    scale = 255.0 / (hi - lo) if hi > lo else 0.0
    return ((values - lo) * scale).round().astype(np.uint8)
