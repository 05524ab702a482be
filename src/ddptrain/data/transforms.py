"""Train and evaluation transforms (torchvision, in uint8), normalisation of whole batches, and the
decode size each transform needs."""

from __future__ import annotations

import math

import torch
from torchvision.transforms import v2

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
EVAL_CROP_FRACTION = 0.875  # Resize(S / 0.875) then CenterCrop(S), the usual ImageNet evaluation


def eval_resize_size(img_size: int) -> int:
    return int(math.floor(img_size / EVAL_CROP_FRACTION))


def train_transform(img_size: int, min_crop_scale: float) -> v2.Compose:
    """Crop, resize and flip in 8 bits; the result is a uint8 CHW tensor (see `normalize`)."""
    return v2.Compose(
        [
            v2.RandomResizedCrop(img_size, scale=(min_crop_scale, 1.0), antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ToImage(),
        ]
    )


def eval_transform(img_size: int) -> v2.Compose:
    return v2.Compose(
        [
            v2.Resize(eval_resize_size(img_size), antialias=True),
            v2.CenterCrop(img_size),
            v2.ToImage(),
        ]
    )


def normalize(images: torch.Tensor) -> torch.Tensor:
    """uint8 images (N, C, H, W), on any device -> float32 scaled to [0, 1] and normalised with the
    ImageNet mean and std, in one pass over the batch where it lives (the GPU, in training).

    Loader workers therefore hand over a quarter of the bytes and never touch floats; a batch that is
    already floating point is returned unchanged."""
    if images.is_floating_point():
        return images
    mean = torch.tensor([255.0 * m for m in IMAGENET_MEAN], device=images.device).view(1, -1, 1, 1)
    scale = torch.tensor([1.0 / (255.0 * s) for s in IMAGENET_STD], device=images.device).view(1, -1, 1, 1)
    return images.float().sub_(mean).mul_(scale)  # one float32 copy, then two in-place passes


def train_decode_min_side(img_size: int, min_crop_scale: float) -> int:
    """Shorter side the decoder must keep so that even the smallest, narrowest random crop
    (area fraction min_crop_scale, aspect 3/4) still has at least img_size pixels a side."""
    return int(math.ceil(img_size / math.sqrt(min_crop_scale * 0.75)))


def eval_decode_min_side(img_size: int) -> int:
    return eval_resize_size(img_size)
