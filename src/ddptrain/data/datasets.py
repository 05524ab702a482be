"""Map-style dataset over (path, label) samples that never lets one bad file stop training."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Callable, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple, Union

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from ..errors import DataError
from ..util import mix_seed, one_line
from .crops import stack
from .gpudecode import Encoded, EncodedImage
from .images import UNREADABLE_ERRORS, ImageLimits, decode_upright, describe_unreadable, is_plain_jpeg
from .index import Sample, Samples, as_samples
from .transforms import IMAGENET_MEAN, IMAGENET_STD, Prepare, Stats, normalize

log = logging.getLogger("ddptrain")

MAX_SUBSTITUTIONS = 64
_SUBSTITUTE_STRIDE = 7919  # a prime step, so substitutes do not cluster in one class folder


class Item(NamedTuple):
    image: Optional[Union[torch.Tensor, EncodedImage]]  # None: unreadable, not substituted; EncodedImage: --decode gpu
    label: Any  # a class index; --task multilabel: the sample's 0/1 row over the classes
    failures: Tuple[str, ...]  # "path: reason" for every unreadable file met on the way
    load_s: float = 0.0  # seconds spent reading, decoding and transforming it


def augmentation_seed(seed: int, epoch: int, index: int, copy: int = 0) -> int:
    """The random draws for one sample are a pure function of (seed, epoch, sample index) and, with repeated
    augmentation, of which copy of the sample it is: they do not depend on the rank, the worker, the number of
    processes or whether the run was resumed."""
    return mix_seed(seed, epoch, index, *((copy,) if copy else ()))


def _sample_key(item: Union[int, Tuple[int, ...]]) -> Tuple[int, int, int]:
    """(index, epoch, copy) from a training sampler's (index, epoch[, copy]) or an evaluation sampler's index."""
    if isinstance(item, int):
        return item, 0, 0
    index, epoch, *rest = item
    return index, epoch, rest[0] if rest else 0


class ImageDataset(Dataset):
    """Decodes and transforms one sample.

    An unreadable file is never fatal. In training (`substitute=True`) the next readable sample in a
    fixed order takes its place, so every rank keeps the same batch count and size and DDP stays in
    step; in evaluation it is left out, so each readable image is counted exactly once. Either way the
    failure travels with the batch to be counted and reported.
    """

    def __init__(
        self,
        samples: Union[Samples, Sequence[Sample]],
        transform: Callable,
        seed: int = 0,
        substitute: bool = False,
        limits: ImageLimits = ImageLimits(),
        encoded: bool = False,
    ):
        # Compact arrays (or a shard index): workers forked from this process read them without copying them.
        self.samples = as_samples(samples)
        self.limits = limits
        self.transform = transform  # a transforms.Prepare (decodes as small as its crop allows), or any callable
        self.seed = seed
        self.substitute = substitute
        self.encoded = encoded  # hand over a plain JPEG's bytes and crop box: the device decodes (--decode gpu)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, item) -> Item:
        index, epoch, copy = _sample_key(item)
        started = time.perf_counter()
        failures: List[str] = []
        for attempt in range(MAX_SUBSTITUTIONS if self.substitute else 1):
            current = (index + attempt * _SUBSTITUTE_STRIDE) % len(self.samples)
            try:
                tensor = self._load(
                    self.samples.read(current, self.limits), augmentation_seed(self.seed, epoch, index, copy)
                )
            except UNREADABLE_ERRORS as error:
                failures.append(f"{one_line(self.samples.name(current))}: {describe_unreadable(error)}")
                continue
            if isinstance(tensor, EncodedImage):  # named, should the device's decoder refuse it
                tensor = dataclasses.replace(tensor, name=self.samples.name(current))
            return Item(tensor, self._label(current), tuple(failures), time.perf_counter() - started)
        if self.substitute:
            raise DataError(
                f"{source_of(self.samples)}: {MAX_SUBSTITUTIONS} images in a row could not be read, e.g. {failures[0]}; "
                f"{getattr(self.samples, 'hint', '') or 'check the data'} (ddptrain skips single bad files, not a "
                "broken dataset)"
            )
        return Item(None, self._label(index), tuple(failures), time.perf_counter() - started)

    def _label(self, index: int) -> Any:
        targets = getattr(self.samples, "targets", None)
        return int(self.samples.labels[index]) if targets is None else targets[index]

    def _load(self, data: Any, seed: int) -> Union[torch.Tensor, EncodedImage]:
        """Decode and transform with torch's default generator seeded for this sample (its state restored)."""
        generator = torch.default_generator
        saved = generator.get_state()
        generator.manual_seed(seed)
        try:
            if isinstance(data, (Image.Image, torch.Tensor)):  # an image a Python dataset gave (ddptrain.fit)
                return self.transform(data)
            if isinstance(self.transform, Prepare):
                if self.encoded and is_plain_jpeg(data):
                    plan = self.transform.plan(data, self.limits)
                    return EncodedImage(torch.frombuffer(bytearray(data), dtype=torch.uint8), plan)
                return self.transform.load(data, self.limits)
            return self.transform(decode_upright(data, limits=self.limits))
        finally:
            generator.set_state(saved)


def source_of(samples) -> str:
    """What error messages call the data a sample comes from ("CSV manifest /d/list.csv", "shard set URL", ...)."""
    return getattr(samples, "source", "") or f"the data in {getattr(samples, 'root', '?')}"


class Batch(NamedTuple):
    images: torch.Tensor
    labels: torch.Tensor
    failures: Tuple[str, ...]
    load_s: float = 0.0  # summed over its items: the input pipeline's cost, wherever it ran
    stats: Stats = (IMAGENET_MEAN, IMAGENET_STD)  # the (mean, std) its uint8 images are normalised with
    encoded: Optional[Encoded] = None  # --decode gpu: the images still to decode on the device (`images` is empty)

    def __len__(self) -> int:
        return len(self.labels)

    def to_device(self, device: torch.device, channels_last: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
        """(images, labels) on `device`: uint8 travels (or JPEG bytes, decoded there), the float copy is made and
        normalised there."""
        pixels = self.encoded.decode(device) if self.encoded is not None else self.images.to(device, non_blocking=True)
        images = normalize(pixels, self.stats)
        # the model's own layout: channel-last pixels into a contiguous model give 1x1 convolutions channel-last
        # gradients, which DDP's buckets copy with a warning ("Grad strides do not match bucket view strides")
        images = images.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        return images, self.labels.to(device, non_blocking=True)


def collate(
    items: Sequence[Item],
    normalized: bool = False,
    stats: Stats = (IMAGENET_MEAN, IMAGENET_STD),
    prepare: Optional[Callable] = None,
) -> Batch:
    """Stack readable samples; keep the failures so the training loop can count them.

    Batches stay uint8 for a GPU, which normalises them itself (Batch.to_device); `normalized`
    does it here instead, in the loader worker, when the model runs on the CPU: the worker then
    works in parallel with the training step rather than adding to it."""
    kept = [(item.image, item.label) for item in items if item.image is not None]
    failures = tuple(f for item in items for f in item.failures)
    load_s = sum(item.load_s for item in items)
    if not kept:
        return Batch(torch.empty(0), torch.empty(0, dtype=torch.long), failures, load_s, stats)
    if isinstance(kept[0][1], np.ndarray):  # --task multilabel: 0/1 rows, the targets of the loss
        labels = torch.from_numpy(np.stack([label for _, label in kept])).float()
    else:
        labels = torch.tensor([label for _, label in kept], dtype=torch.long)
    if any(isinstance(image, EncodedImage) for image, _ in kept):  # --decode gpu: `prepare` crops on the device
        encoded = Encoded([image for image, _ in kept], prepare)
        return Batch(torch.empty(0, dtype=torch.uint8), labels, failures, load_s, stats, encoded)
    images = stack([image for image, _ in kept])  # type: ignore[misc]
    if normalized:
        images = normalize(images, stats)
    return Batch(images, labels, failures, load_s, stats)


class UnreadableFiles:
    """Warns once per unreadable file; every rank warns about the files it met, so none goes unnamed (the console
    prefixes the other ranks' lines with their rank: logs.setup_logging)."""

    def __init__(self) -> None:
        self.seen: Set[str] = set()

    def __call__(self, failures: Iterable[str]) -> None:
        for failure in failures:
            if failure not in self.seen:
                self.seen.add(failure)
                log.warning("skipped unreadable image %s", failure)
