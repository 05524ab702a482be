"""Where in an image its crop comes from, decided before a pixel is decoded.

A training crop (RandomResizedCrop's box and a horizontal flip) is drawn from the image's size alone, read from
its header, so the decoder can then be told how small it may decode: JPEG's DCT scaling gives 1/2, 1/4 or 1/8 of
the size for a fraction of the work, and `reduction` picks the largest factor that still leaves the box at least
the output size on both sides — a crop is never upsampled where the full-size decode would not have upsampled it.
The box is in full-size pixels whatever the decoder does, so the draws are the same for every decode path
(the box's region alone, reduced, full, on the GPU): a function of (seed, epoch, sample) only. `render` crops and
resizes in one step, in uint8, on whatever device the pixels are.

A photo whose EXIF orientation says it is stored turned (a camera's portrait shot, stored landscape) is cropped
as viewers show it: the box is drawn on the upright picture, mapped to the stored pixels (`Box.orient` keeps the
turn), and the cropped region alone is turned upright (`orient`) before it is resized.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence, Tuple, Union

import torch
from PIL import Image
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as F

from .images import orient, upright_size

RATIO = (3.0 / 4.0, 4.0 / 3.0)  # RandomResizedCrop's aspect-ratio range
REDUCTIONS = (8, 4, 2)  # what JPEG's DCT scaling offers (besides 1)
_TRIES = 10


@dataclass(frozen=True)
class Box:
    """A region of the full-size image in its pixels (floats: an evaluation box need not fall on pixels), and
    whether the result is mirrored."""

    top: float
    left: float
    height: float
    width: float
    flip: bool = False
    orient: int = 1  # the EXIF orientation that turns the box's stored pixels upright (1: none)

    def reduction(self, size: int) -> int:
        """The largest JPEG scale-down (8, 4, 2, else 1) that keeps this box at least `size` pixels on each side."""
        return next((f for f in REDUCTIONS if min(self.height, self.width) / f >= size), 1)

    def snapped(self, size: int) -> Box:
        """This box with its edges moved (inwards, by less than the factor) onto multiples of its reduction
        factor, so that at the reduced size it starts and ends on whole pixels: the reduced decode then sees
        exactly the region the full one does. A box that allows no reduction is returned as it is."""
        f = self.reduction(size)
        if f == 1:
            return self
        top, left = math.ceil(self.top / f) * f, math.ceil(self.left / f) * f
        bottom, right = (self.top + self.height) // f * f, (self.left + self.width) // f * f
        return replace(self, top=top, left=left, height=bottom - top, width=right - left)

    def scaled(self, factor: int) -> Tuple[int, int, int, int]:
        """(top, left, bottom, right) in the pixels of an image decoded at 1/factor of the full size, at least
        one pixel each way."""
        top, left = int(round(self.top / factor)), int(round(self.left / factor))
        bottom = max(top + 1, int(round((self.top + self.height) / factor)))
        right = max(left + 1, int(round((self.left + self.width) / factor)))
        return top, left, bottom, right


@dataclass(frozen=True)
class TrainCrop:
    """RandomResizedCrop (area fraction in `scale`, aspect ratio log-uniform in 3/4..4/3) and a horizontal flip
    with probability 1/2, drawn from torch's default generator (seeded per sample by the dataset)."""

    size: int
    scale: Tuple[float, float] = (0.08, 1.0)

    def box(self, width: int, height: int, orientation: int = 1) -> Box:
        """The box in the stored pixels of a `width` x `height` image, drawn on it as shown upright."""
        return stored_box(self._draw(*upright_size(width, height, orientation)), orientation, width, height).snapped(
            self.size
        )

    def _draw(self, width: int, height: int) -> Box:
        area = width * height
        low, high = math.log(RATIO[0]), math.log(RATIO[1])
        for _ in range(_TRIES):  # one draw of five numbers per try: area, ratio, top, left, flip
            fraction, log_ratio, down, across, flip = torch.rand(5).tolist()
            target = area * (self.scale[0] + (self.scale[1] - self.scale[0]) * fraction)
            ratio = math.exp(low + (high - low) * log_ratio)
            w, h = int(round(math.sqrt(target * ratio))), int(round(math.sqrt(target / ratio)))
            if 0 < w <= width and 0 < h <= height:
                top = min(int(down * (height - h + 1)), height - h)
                left = min(int(across * (width - w + 1)), width - w)
                return Box(top, left, h, w, flip < 0.5)
        return _fallback(width, height, flip < 0.5)


def _fallback(width: int, height: int, flip: bool) -> Box:
    """The centre crop with the aspect ratio clamped to RATIO, when ten draws found no box that fits."""
    if width / height < RATIO[0]:
        w, h = width, int(round(width / RATIO[0]))
    elif width / height > RATIO[1]:
        w, h = int(round(height * RATIO[1])), height
    else:
        w, h = width, height
    return Box((height - h) // 2, (width - w) // 2, h, w, flip)


@dataclass(frozen=True)
class EvalCrop:
    """Resize the shorter side to floor(size / crop_fraction), then the centre `size` x `size`: as a box in the
    full-size image, so that only that region is resized (and decoded at reduced size where it allows)."""

    size: int
    crop_fraction: float = 0.875

    def resize(self) -> int:
        return int(math.floor(self.size / self.crop_fraction))

    def box(self, width: int, height: int, orientation: int = 1) -> Box:
        upright = self._upright_box(*upright_size(width, height, orientation))
        return stored_box(upright, orientation, width, height).snapped(self.size)

    def _upright_box(self, width: int, height: int) -> Box:
        resize = self.resize()
        short, long = min(width, height), max(width, height)
        resized_long = int(resize * long / short)
        rw, rh = (resize, resized_long) if width <= height else (resized_long, resize)
        sx, sy = width / rw, height / rh  # full-size pixels per resized pixel
        top, left = int(round((rh - self.size) / 2.0)), int(round((rw - self.size) / 2.0))
        return Box(top * sy, left * sx, self.size * sy, self.size * sx)


Crop = Union[TrainCrop, EvalCrop]


def _stored_point(x: float, y: float, orientation: int, width: int, height: int) -> Tuple[float, float]:
    """The point of the stored `width` x `height` pixels (edge coordinates) shown at (x, y) of the upright image."""
    return {
        1: (x, y),
        2: (width - x, y),
        3: (width - x, height - y),
        4: (x, height - y),
        5: (y, x),
        6: (y, height - x),
        7: (width - y, height - x),
        8: (width - y, x),
    }[orientation]


def stored_box(box: Box, orientation: int, width: int, height: int) -> Box:
    """`box`, drawn on the upright image, as the region of the stored `width` x `height` pixels it shows; its
    flip stays a mirror of the upright crop."""
    if orientation == 1:
        return box
    corners = [
        _stored_point(x, y, orientation, width, height)
        for x, y in ((box.left, box.top), (box.left + box.width, box.top + box.height))
    ]
    (x0, x1), (y0, y1) = sorted(c[0] for c in corners), sorted(c[1] for c in corners)
    return Box(y0, x0, y1 - y0, x1 - x0, box.flip, orientation)


def as_chw(image: Union[Image.Image, torch.Tensor]) -> torch.Tensor:
    """A uint8 (3, H, W) tensor: a tensor as it is, an RGB PIL image through one copy of its pixels (a view in
    height-width-channel order, which the resize reads directly)."""
    if isinstance(image, torch.Tensor):
        return image
    width, height = image.size
    pixels = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
    return pixels.view(height, width, 3).permute(2, 0, 1)


def size_of(image: Union[Image.Image, torch.Tensor]) -> Tuple[int, int]:
    """(width, height)."""
    if isinstance(image, torch.Tensor):
        return int(image.shape[-1]), int(image.shape[-2])
    return image.size


def render(
    image: Union[Image.Image, torch.Tensor],
    box: Box,
    full: Tuple[int, int],
    size: int,
    mode: InterpolationMode,
    reduced: int = 1,
) -> torch.Tensor:
    """`box` (in the pixels of the `full`-size image) of `image` (decoded at full size, or at 1/`reduced` of it:
    a decoder that could not reduce returns the full size, which is recognised), resized to
    `size` x `size` in one step and mirrored if the box says so (`resize_region`)."""
    pixels = as_chw(image)
    top, left, bottom, right = box.scaled(1 if pixels.shape[-1] == full[0] else reduced)
    return resize_region(orient(pixels[:, top:bottom, left:right], box.orient), size, mode, box.flip)


def resize_region(region: torch.Tensor, size: int, mode: InterpolationMode, flip: bool) -> torch.Tensor:
    """A uint8 (3, h, w) region resized to `size` x `size` and mirrored if `flip`: a uint8 (3, size, size) tensor
    on the region's device, its pixels stored channel-last (as decoders write them; `stack` keeps them so).

    The region is first copied out channel-last and whole: torch's uint8 resampling is about twice as fast on
    that than on a strided view of the decoded image. Bilinear on the CPU calls torch's uint8 resampling directly:
    the same kernel and bytes as torchvision's `resize`, without its dispatch (130 rather than 150 µs for a
    training crop of a 500 x 375 photo to 160 px, one thread)."""
    pixels = region.unsqueeze(0).contiguous(memory_format=torch.channels_last)
    if pixels.device.type == "cpu" and mode == InterpolationMode.BILINEAR:
        out = torch.nn.functional.interpolate(pixels, (size, size), mode="bilinear", antialias=True)[0]
    else:
        out = F.resize(pixels, [size, size], interpolation=mode, antialias=True)[0]
    return out.flip(-1) if flip else out


def render_centre(image: Union[Image.Image, torch.Tensor], crop: EvalCrop, mode: InterpolationMode) -> torch.Tensor:
    """Evaluation's Resize(floor(size / crop_fraction)) of the shorter side, then the centre `size` x `size`, as
    torchvision does it (whatever size `image` was decoded at: the resize goes to the same size)."""
    pixels = as_chw(image).unsqueeze(0).contiguous(memory_format=torch.channels_last)
    resized = F.resize(pixels, [crop.resize()], interpolation=mode, antialias=True)
    return F.center_crop(resized, [crop.size, crop.size]).contiguous(memory_format=torch.channels_last)[0]


def stack(images: Sequence[torch.Tensor]) -> torch.Tensor:
    """torch.stack, without reordering the bytes of images stored channel-last: (N, 3, H, W) whose memory is
    (N, H, W, 3), which every consumer (the device copy, normalisation, the model) takes as it is."""
    if all(image.dim() == 3 and image.permute(1, 2, 0).is_contiguous() for image in images):
        return torch.stack([image.permute(1, 2, 0) for image in images]).permute(0, 3, 1, 2)
    return torch.stack(list(images))
