"""Samplers and DataLoaders: disjoint training shards and exactly-once evaluation."""
from __future__ import annotations

import random
from functools import partial
from typing import Iterator, List, Optional, Tuple

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from ..preempt import ignore_stop_signals
from .datasets import collate

MAX_AUTO_WORKERS = 8


class EpochSampler(Sampler):
    """Disjoint training shards, reshuffled by (seed, epoch), the uneven tail dropped; yields
    (index, epoch) so the dataset derives each sample's augmentation seed from it.

    The epoch's permutation is the same for every world size; rank r takes positions r, r+W, ...
    After `set_epoch(epoch, start)` the first `start` positions count as already consumed: the
    remainder is sharded again over the current ranks, so a run stopped mid-epoch continues without
    repeating or skipping a sample, with the same or with another number of processes."""

    def __init__(self, length: int, rank: int, world_size: int, seed: int):
        self.length, self.rank, self.world_size, self.seed = length, rank, world_size, seed
        self.epoch, self.start = 0, 0

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        self.epoch, self.start = epoch, min(max(0, start), self.length)

    def permutation(self) -> List[int]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return torch.randperm(self.length, generator=generator).tolist()

    def _usable(self) -> int:
        return (self.length - self.start) // self.world_size * self.world_size

    def __iter__(self) -> Iterator[Tuple[int, int]]:
        remaining = self.permutation()[self.start:self.start + self._usable()]
        epoch = self.epoch
        return ((index, epoch) for index in remaining[self.rank::self.world_size])

    def __len__(self) -> int:
        return self._usable() // self.world_size


class IndexSampler(EpochSampler):
    """EpochSampler for datasets that take a plain index (any map-style dataset, e.g. ImageFolder)."""

    def __iter__(self) -> Iterator[int]:
        return (index for index, _ in super().__iter__())


class ShardSampler(Sampler):
    """Each index goes to exactly one rank: no padding, no duplicates. Ranks may get uneven counts,
    or none at all, so evaluation must not run collectives per batch (see engine.evaluate)."""

    def __init__(self, length: int, rank: int, world_size: int):
        self.indices = list(range(rank, length, world_size))

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


def auto_workers(requested: Optional[int], cpus_per_process: int) -> int:
    if requested is not None:
        return requested
    return max(1, min(MAX_AUTO_WORKERS, cpus_per_process))


def init_worker(worker_id: int) -> None:
    ignore_stop_signals()  # the rank process decides when to stop (see ddptrain.preempt)
    # torch seeds each worker from the loader's generator; give numpy and random the same
    # seed for user transforms that draw from them.
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


def _collate_for(normalize_in_workers: bool):
    """uint8 batches for an accelerator (it normalises them); normalised floats for a CPU model."""
    return partial(collate, normalized=True) if normalize_in_workers else collate


def train_loader(dataset: Dataset, batch_size: int, rank: int, world_size: int, seed: int,
                 workers: int, pin_memory: bool, normalize_in_workers: bool = False) -> DataLoader:
    sampler = EpochSampler(len(dataset), rank, world_size, seed)
    generator = torch.Generator().manual_seed(seed * 1000 + rank)  # worker base seeds differ by rank
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                      pin_memory=pin_memory, drop_last=True, collate_fn=_collate_for(normalize_in_workers),
                      persistent_workers=workers > 0, worker_init_fn=init_worker, generator=generator,
                      prefetch_factor=4 if workers > 0 else None)


def eval_loader(dataset: Dataset, batch_size: int, rank: int, world_size: int, workers: int,
                pin_memory: bool, persistent: bool = True, normalize_in_workers: bool = False) -> DataLoader:
    sampler = ShardSampler(len(dataset), rank, world_size)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                      pin_memory=pin_memory, drop_last=False, collate_fn=_collate_for(normalize_in_workers),
                      persistent_workers=persistent and workers > 0, worker_init_fn=init_worker)
