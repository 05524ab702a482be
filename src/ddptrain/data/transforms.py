"""How images become model input: the preprocessing values (`Preprocess`), train and evaluation transforms
(`Prepare`: crop box first, then a decode as small as it allows, crop and resize in uint8), normalisation of
whole batches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from PIL import Image
from torchvision.transforms import v2

from ..config import DataConfig, parse_channels
from .crops import Box, Crop, EvalCrop, TrainCrop, as_chw, orient, render, render_centre, resize_region, size_of
from .images import PIL_TRANSPOSE, ImageLimits, decode_region, decode_rgb, image_geometry, pil_orientation

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


@dataclass(frozen=True)
class Prepare:
    """What one sample becomes: its crop box drawn from the image's size (crops.TrainCrop / EvalCrop), the JPEG
    decoded at the smallest size that box allows (`reduced`) — a training box's region alone, where ddptrain's
    compiled decoder is installed (images.decode_region: the same pixels) — the box cropped and resized in one uint8
    step, then
    `after` (augmentation policies, random erasing) on the uint8 tensor. Training draws come from torch's default
    generator, which the dataset seeds per (seed, epoch, sample).

    Called on an image already decoded (a PIL image or a uint8 tensor), it does the same from the crop on."""

    crop: Crop
    mode: v2.InterpolationMode = v2.InterpolationMode.BILINEAR
    after: Tuple[Any, ...] = ()
    reduced: bool = True  # False: always decode at full size (the reference `--decode full`)

    def load(self, data: bytes, limits: ImageLimits = ImageLimits()) -> torch.Tensor:
        box, full = self.plan(data, limits)
        reduce = box.reduction(self.crop.size) if self.reduced else 1
        if self.reduced and isinstance(self.crop, TrainCrop):  # a training box: decode that region alone
            region = decode_region(data, reduce, *box.scaled(reduce))
            if region is not None:
                return self.augmented(resize_region(orient(region, box.orient), self.crop.size, self.mode, box.flip))
        return self.finish(decode_rgb(data, limits=limits, reduce=reduce), box, full, reduce)

    def plan(self, data: bytes, limits: ImageLimits = ImageLimits()) -> Tuple[Box, Tuple[int, int]]:
        """The box `load` would crop (in the stored pixels, with the EXIF orientation that turns them upright), and
        the stored pixels' full size, without decoding (the GPU decodes)."""
        width, height, orientation = image_geometry(data, limits)
        return self.crop.box(width, height, orientation), (width, height)

    def __call__(self, image: Union[Image.Image, torch.Tensor]) -> torch.Tensor:
        """An image a Python dataset gave; a PIL image that still carries an EXIF orientation is turned upright
        first (one its library already turned carries none)."""
        if isinstance(image, Image.Image) and (turn := pil_orientation(image)) != 1:
            image = image.transpose(PIL_TRANSPOSE[turn])
        full = size_of(image)
        return self.finish(image, self.crop.box(*full), full)

    def finish(
        self, image: Union[Image.Image, torch.Tensor], box: Box, full: Tuple[int, int], reduced: int = 1
    ) -> torch.Tensor:
        if isinstance(self.crop, EvalCrop):  # the box only told the decoder how small it may decode
            upright = orient(as_chw(image), box.orient) if box.orient != 1 else image
            tensor = render_centre(upright, self.crop, self.mode)
        else:
            tensor = render(image, box, full, self.crop.size, self.mode, reduced)
        return self.augmented(tensor)

    def augmented(self, tensor: torch.Tensor) -> torch.Tensor:
        """`after` (augmentation policies, random erasing) applied to the cropped uint8 tensor."""
        for step in self.after:
            tensor = step(tensor)
        return tensor


def train_transform(
    img_size: int,
    min_crop_scale: float,
    preprocess: Preprocess = Preprocess(),
    augment: Augment = Augment(),
    reduced: bool = True,
) -> Prepare:
    """Crop, resize, flip (and `augment`) in 8 bits; the result is a uint8 CHW tensor (see `normalize`)."""
    after = [*augment.policy_transform(preprocess.mode)]
    if augment.erasing > 0:
        after.append(v2.RandomErasing(p=augment.erasing, value=0))
    return Prepare(TrainCrop(img_size, (min_crop_scale, 1.0)), preprocess.mode, tuple(after), reduced)


def eval_transform(img_size: int, preprocess: Preprocess = Preprocess(), reduced: bool = True) -> Prepare:
    return Prepare(EvalCrop(img_size, preprocess.crop_fraction), preprocess.mode, (), reduced)


def normalize(images: torch.Tensor, stats: Stats = (IMAGENET_MEAN, IMAGENET_STD)) -> torch.Tensor:
    """uint8 images (N, C, H, W), on any device -> float32 scaled to [0, 1] and normalised with the
    per-channel (mean, std) `stats`, in one pass over the batch where it lives (the GPU, in training).

    Loader workers therefore hand over a quarter of the bytes and never touch floats; a batch that is
    already floating point is returned unchanged."""
    if images.is_floating_point():
        return images
    mean_of, std_of = stats
    mean = torch.tensor([255.0 * m for m in mean_of], device=images.device)
    scale = torch.tensor([1.0 / (255.0 * s) for s in std_of], device=images.device)
    if images.dim() == 4 and not images.is_contiguous() and images.permute(0, 2, 3, 1).is_contiguous():
        # stored channel-last (crops.stack): one row of per-pixel values, broadcast over the batch (a per-channel
        # broadcast over that layout is several times slower)
        n, c, h, w = images.shape
        rows = images.permute(0, 2, 3, 1).reshape(n, h * w * c).float()
        rows.sub_(mean.repeat(h * w)).mul_(scale.repeat(h * w))
        return rows.view(n, h, w, c).permute(0, 3, 1, 2)
    return images.float().sub_(mean.view(1, -1, 1, 1)).mul_(scale.view(1, -1, 1, 1))  # one copy, two in-place passes
