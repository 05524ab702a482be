"""Train and evaluation transforms (torchvision), and the decode size each one needs."""
from __future__ import annotations

import math

import torch
from torchvision.transforms import v2

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
EVAL_CROP_FRACTION = 0.875  # Resize(S / 0.875) then CenterCrop(S), the usual ImageNet evaluation


def eval_resize_size(img_size: int) -> int:
    return int(math.floor(img_size / EVAL_CROP_FRACTION))


def _to_normalized_tensor() -> list:
    return [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)]


def train_transform(img_size: int, min_crop_scale: float) -> v2.Compose:
    return v2.Compose([
        v2.RandomResizedCrop(img_size, scale=(min_crop_scale, 1.0), antialias=True),
        v2.RandomHorizontalFlip(),
        *_to_normalized_tensor(),
    ])


def eval_transform(img_size: int) -> v2.Compose:
    return v2.Compose([
        v2.Resize(eval_resize_size(img_size), antialias=True),
        v2.CenterCrop(img_size),
        *_to_normalized_tensor(),
    ])


def train_decode_min_side(img_size: int, min_crop_scale: float) -> int:
    """Shorter side the decoder must keep so that even the smallest, narrowest random crop
    (area fraction min_crop_scale, aspect 3/4) still has at least img_size pixels a side."""
    return int(math.ceil(img_size / math.sqrt(min_crop_scale * 0.75)))


def eval_decode_min_side(img_size: int) -> int:
    return eval_resize_size(img_size)
