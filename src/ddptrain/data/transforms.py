"""How images become model input: the preprocessing values (`Preprocess`), train and evaluation transforms
(torchvision, in uint8), normalisation of whole batches, and the decode size each transform needs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import torch
from torchvision.transforms import v2

from ..config import DataConfig, parse_channels

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
EVAL_CROP_FRACTION = 0.875  # Resize(S / 0.875) then CenterCrop(S), the usual ImageNet evaluation
DEFAULT_IMG_SIZE = 224
Stats = Tuple[Tuple[float, ...], Tuple[float, ...]]  # (mean, std) per channel, in [0, 1] units


@dataclass(frozen=True)
class Preprocess:
    """What a model expects of its input. A run resolves it once (flags, else the model's pretrained config, else
    ImageNet's values) and records it in config.yaml, its checkpoints and exported files; eval, predict and exports
    read it back from there."""

    img_size: int = DEFAULT_IMG_SIZE
    mean: Tuple[float, ...] = IMAGENET_MEAN
    std: Tuple[float, ...] = IMAGENET_STD
    interpolation: str = "bilinear"
    crop_fraction: float = EVAL_CROP_FRACTION

    @classmethod
    def of(cls, data: DataConfig) -> Preprocess:
        """From a config; what it leaves unset (a run written before these options existed) is ImageNet's."""
        return cls(
            data.img_size or DEFAULT_IMG_SIZE,
            parse_channels(data.mean) or IMAGENET_MEAN,
            parse_channels(data.std) or IMAGENET_STD,
            data.interpolation or "bilinear",
            data.crop_fraction or EVAL_CROP_FRACTION,
        )

    def flat(self) -> Dict[str, Any]:
        """As config options (`img_size`, `mean: (0.5, 0.5, 0.5)`, ...)."""
        return {
            "img_size": self.img_size,
            "mean": tuple(float(v) for v in self.mean),
            "std": tuple(float(v) for v in self.std),
            "interpolation": self.interpolation,
            "crop_fraction": self.crop_fraction,
        }

    @property
    def stats(self) -> Stats:
        return self.mean, self.std

    @property
    def mode(self) -> v2.InterpolationMode:
        return v2.InterpolationMode(self.interpolation)


def eval_resize_size(img_size: int, crop_fraction: float = EVAL_CROP_FRACTION) -> int:
    return int(math.floor(img_size / crop_fraction))


@dataclass(frozen=True)
class Augment:
    """Per-image training augmentation beyond the crop and flip; each draw a function of (seed, epoch, sample index,
    copy), like the crop's (see datasets.ImageDataset). `repeats` > 1 is repeated augmentation: the training sampler
    (samplers.EpochSampler) yields each image that many times per epoch, on different ranks, each copy drawn anew."""

    policy: Optional[str] = None  # randaugment, trivialaugment, autoaugment
    magnitude: int = 9  # RandAugment's
    erasing: float = 0.0  # RandomErasing's probability
    repeats: int = 1

    @classmethod
    def of(cls, data: DataConfig) -> Augment:
        return cls(data.auto_augment, data.augment_magnitude, data.random_erasing, data.repeated_aug)

    def policy_transform(self, mode: v2.InterpolationMode) -> List[Any]:
        if mode not in (v2.InterpolationMode.NEAREST, v2.InterpolationMode.BILINEAR):
            mode = v2.InterpolationMode.BILINEAR  # the policies' rotations and shears on tensors take no bicubic
        if self.policy == "randaugment":
            return [v2.RandAugment(magnitude=self.magnitude, interpolation=mode)]
        if self.policy == "trivialaugment":
            return [v2.TrivialAugmentWide(interpolation=mode)]
        if self.policy == "autoaugment":
            return [v2.AutoAugment(v2.AutoAugmentPolicy.IMAGENET, interpolation=mode)]
        return []


def train_transform(
    img_size: int, min_crop_scale: float, preprocess: Preprocess = Preprocess(), augment: Augment = Augment()
) -> v2.Compose:
    """Crop, resize, flip (and `augment`) in 8 bits; the result is a uint8 CHW tensor (see `normalize`)."""
    return v2.Compose(
        [
            v2.RandomResizedCrop(img_size, scale=(min_crop_scale, 1.0), interpolation=preprocess.mode, antialias=True),
            v2.RandomHorizontalFlip(),
            *augment.policy_transform(preprocess.mode),
            v2.ToImage(),
            *([v2.RandomErasing(p=augment.erasing, value=0)] if augment.erasing > 0 else []),
        ]
    )


def eval_transform(img_size: int, preprocess: Preprocess = Preprocess()) -> v2.Compose:
    return v2.Compose(
        [
            v2.Resize(eval_resize_size(img_size, preprocess.crop_fraction), preprocess.mode, antialias=True),
            v2.CenterCrop(img_size),
            v2.ToImage(),
        ]
    )


def normalize(images: torch.Tensor, stats: Stats = (IMAGENET_MEAN, IMAGENET_STD)) -> torch.Tensor:
    """uint8 images (N, C, H, W), on any device -> float32 scaled to [0, 1] and normalised with the
    per-channel (mean, std) `stats`, in one pass over the batch where it lives (the GPU, in training).

    Loader workers therefore hand over a quarter of the bytes and never touch floats; a batch that is
    already floating point is returned unchanged."""
    if images.is_floating_point():
        return images
    mean_of, std_of = stats
    mean = torch.tensor([255.0 * m for m in mean_of], device=images.device).view(1, -1, 1, 1)
    scale = torch.tensor([1.0 / (255.0 * s) for s in std_of], device=images.device).view(1, -1, 1, 1)
    return images.float().sub_(mean).mul_(scale)  # one float32 copy, then two in-place passes


def train_decode_min_side(img_size: int, min_crop_scale: float) -> int:
    """Shorter side the decoder must keep so that even the smallest, narrowest random crop
    (area fraction min_crop_scale, aspect 3/4) still has at least img_size pixels a side."""
    return int(math.ceil(img_size / math.sqrt(min_crop_scale * 0.75)))


def eval_decode_min_side(img_size: int, crop_fraction: float = EVAL_CROP_FRACTION) -> int:
    return eval_resize_size(img_size, crop_fraction)
