"""Every DataLoader ddptrain makes is built here — for training, evaluation, `ddptrain eval` and the
library API — so worker seeding, signal handling and the uint8-or-normalised choice exist once."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Dict, Iterable, Iterator, Optional, Sequence, Sized, Union, cast

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from ..errors import ConfigError, DdptrainError
from ..runtime.preempt import ignore_stop_signals
from ..util import counted, mix_seed
from .datasets import ImageDataset, collate
from .images import ImageLimits
from .index import Sample, Samples
from .prefetch import Prefetcher
from .samplers import EpochSampler, ExactEvalSampler
from .transforms import (
    Augment,
    Prepare,
    Preprocess,
    Stats,
    eval_transform,
    train_transform,
)

log = logging.getLogger("ddptrain")

MAX_AUTO_WORKERS = 8
TRAIN_PREFETCH = 4  # batches per worker kept ready: covers a slow image or two without stalling the step


@dataclass(frozen=True)
class LoaderSettings:
    """How batches reach this rank's device."""

    batch_size: int
    workers: int
    pin_memory: bool
    normalize_in_workers: bool  # CPU: the workers normalise, in parallel with the step; GPU: the device does
    decode: str = "cpu"  # cpu: reduced-size where the crop allows; full: always the whole image; gpu: on the device

    @classmethod
    def for_device(cls, device: torch.device, batch_size: int, workers: int, decode: str = "cpu") -> LoaderSettings:
        on_cpu = device.type == "cpu"
        decode = "cpu" if decode == "auto" else decode
        return cls(batch_size, workers, not on_cpu, normalize_in_workers=on_cpu and decode != "gpu", decode=decode)

    def image_collate(self, stats: Stats, prepare: Optional[Prepare] = None) -> Callable:
        """uint8 batches for an accelerator (it normalises them); normalised floats for a CPU model; JPEG bytes
        and crop boxes for the device to decode and crop as `prepare` says (--decode gpu)."""
        return partial(collate, normalized=self.normalize_in_workers, stats=stats, prepare=prepare)


# `--decode auto` decodes on the GPU below this many loader workers per process. Measured on an H200 with 16 cores
# (ResNet-50, bf16, 224 and 160 px; benchmarks/RESULTS.md): 2 workers decoding on the CPU fed 1.0-1.4 k images/s,
# the GPU path 1.9-2.5 k whatever the workers; 8 workers on the CPU fed 4.2-5.1 k. The crossover is near 4.
GPU_DECODE_BELOW_WORKERS = 4


def choose_decode(requested: str, device: torch.device, workers: int, augments_on_cpu: bool = False) -> str:
    """The decoding `--decode auto` stands for: gpu (nvJPEG) on a CUDA device fed by fewer than
    GPU_DECODE_BELOW_WORKERS loader workers, where no augmentation needs the CPU path; cpu otherwise. Any other
    choice is kept as asked; gpu where the process has no CUDA device is refused."""
    if requested == "gpu" and device.type != "cuda":
        raise ConfigError(
            f"--decode gpu decodes with nvJPEG on a CUDA device; this process is on {device}: use --decode cpu"
        )
    if requested != "auto":
        return requested
    if device.type == "cuda" and workers < GPU_DECODE_BELOW_WORKERS and not augments_on_cpu:
        return "gpu"
    return "cpu"


def auto_workers(requested: Optional[int], cpus_per_process: int) -> int:
    if requested is not None:
        return requested
    return max(1, min(MAX_AUTO_WORKERS, cpus_per_process))


def batches(loader: Iterable, rank: int) -> Iterator:
    """The loader's batches; a ddptrain error raised in a loader worker (a shard that cannot be fetched) comes back
    wrapped in that worker's traceback — it is raised again as its own one-line message, with this rank, printed
    once per node however many ranks meet it."""
    iterator = iter(loader)
    while True:
        try:
            batch = next(iterator)
        except StopIteration:
            return
        except DdptrainError as error:
            text = str(error)
            if "Original Traceback" not in text:
                raise
            message = text.rstrip().splitlines()[-1].partition(": ")[2] or text
            again = type(error)(message, rank=rank)
            again.summary_key = f"loader-{type(error).__name__}"
            raise again from None
        yield batch


def start_workers(loader: DataLoader) -> None:
    """Fork a persistent loader's workers now. A process that forks while other threads run (TensorBoard's writer,
    the heartbeat, another loader's queue feeders) can hand the child a lock one of them held, and the worker then
    never delivers a batch: an evaluation loader's workers, first forked at the end of the first epoch, hung that way.
    Started while the rank has no threads of its own, they are forked once and reused (the batches they prefetch now
    are dropped when the first real pass begins)."""
    if loader.num_workers > 0 and loader.persistent_workers and getattr(loader, "_iterator", None) is None:
        iter(loader)


def stop_workers(loader: DataLoader) -> None:
    """End a loader's persistent workers now. They ignore SIGTERM (the rank decides when to stop), so a run
    that fails while the loader is still referenced (by the error's traceback) would otherwise wait for them
    at exit."""
    iterator = getattr(loader, "_iterator", None)
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()
    if iterator is not None:
        loader._iterator = None


def is_sharded(dataset: Dataset) -> bool:
    return hasattr(getattr(dataset, "samples", None), "shard_sizes")


def init_worker(worker_id: int) -> None:
    ignore_stop_signals()  # the rank process decides when to stop (see ddptrain.runtime.preempt)
    # torch seeds each worker from the loader's generator; give numpy and random the same
    # seed for user transforms that draw from them.
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


def train_loader(
    dataset: Dataset, sampler: Sampler, settings: LoaderSettings, seed: int, rank: int, **overrides: Any
) -> DataLoader:
    """Equal, full batches on every rank (the uneven tail dropped); workers persist across epochs and
    their random seeds differ by rank."""
    generator = torch.Generator().manual_seed(mix_seed(seed, rank))
    kwargs: Dict[str, Any] = {
        "batch_size": settings.batch_size,
        "sampler": sampler,
        "num_workers": settings.workers,
        "pin_memory": settings.pin_memory,
        "drop_last": True,
        "persistent_workers": settings.workers > 0,
        "worker_init_fn": init_worker,
        "generator": generator,
        "prefetch_factor": TRAIN_PREFETCH if settings.workers > 0 else None,
    }
    return DataLoader(dataset, **{**kwargs, **overrides})


def eval_loader(
    dataset: Dataset, rank: int, world_size: int, settings: LoaderSettings, persistent: bool = True, **overrides: Any
) -> DataLoader:
    """Each sample on exactly one rank (no padding): reduce sums once after the loop, never per batch."""
    kwargs: Dict[str, Any] = {
        "batch_size": settings.batch_size,
        "sampler": ExactEvalSampler(len(cast(Sized, dataset)), rank, world_size, contiguous=is_sharded(dataset)),
        "num_workers": settings.workers,
        "pin_memory": settings.pin_memory,
        "drop_last": False,
        "persistent_workers": persistent and settings.workers > 0,
        "worker_init_fn": init_worker,
    }
    return DataLoader(dataset, **{**kwargs, **overrides})


def training_images(
    samples: Union[Samples, Sequence[Sample]],
    preprocess: Preprocess,
    min_crop_scale: float,
    seed: int,
    rank: int,
    world_size: int,
    settings: LoaderSettings,
    limits: ImageLimits = ImageLimits(),
    augment: Augment = Augment(),
    weights: Optional[np.ndarray] = None,
) -> DataLoader:
    """Random crops and flips (and `augment`), one draw per (seed, epoch, sample, copy); an unreadable file is
    substituted. `weights`: each sample's draw weight (--sampler balanced)."""
    size = preprocess.img_size
    transform = train_transform(size, min_crop_scale, preprocess, augment, reduced=settings.decode != "full")
    dataset = ImageDataset(
        samples,
        transform,
        seed=seed,
        substitute=True,
        limits=limits,
        encoded=settings.decode == "gpu",
    )
    shard_sizes = getattr(samples, "shard_sizes", None)
    if weights is not None and (shard_sizes is not None or augment.repeats > 1):
        raise ConfigError(
            "--sampler balanced draws images one by one: it takes neither a shard set (read shard by shard) nor "
            "--repeated-aug; use --class-weights auto for the imbalance instead"
        )
    sampler = EpochSampler(len(dataset), rank, world_size, seed, augment.repeats, shard_sizes, weights)
    ahead = getattr(samples, "prefetch_shards", 0)
    if getattr(samples, "remote", False) and ahead > 0:
        sampler.prefetcher = Prefetcher(samples, ahead)
        if rank == 0:
            log.info("remote shards: each process fetches up to %s ahead of the one it reads", counted(ahead, "shard"))
    collate_fn = settings.image_collate(preprocess.stats, transform)
    return train_loader(dataset, sampler, settings, seed, rank, collate_fn=collate_fn)


def evaluation_images(
    samples: Union[Samples, Sequence[Sample]],
    preprocess: Preprocess,
    rank: int,
    world_size: int,
    settings: LoaderSettings,
    persistent: bool = True,
    limits: ImageLimits = ImageLimits(),
) -> DataLoader:
    """Resize and centre crop; an unreadable file is left out (and reported)."""
    size = preprocess.img_size
    transform = eval_transform(size, preprocess, reduced=settings.decode != "full")
    dataset = ImageDataset(samples, transform, limits=limits, encoded=settings.decode == "gpu")
    collate_fn = settings.image_collate(preprocess.stats, transform)
    return eval_loader(dataset, rank, world_size, settings, persistent, collate_fn=collate_fn)
