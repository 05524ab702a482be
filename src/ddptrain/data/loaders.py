"""Samplers and DataLoaders: disjoint training shards and exactly-once evaluation."""
from __future__ import annotations

import random
from typing import Iterator, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler

from .datasets import collate

MAX_AUTO_WORKERS = 8


class EpochSampler(DistributedSampler):
    """DistributedSampler (shuffled by seed and epoch, uneven tail dropped) that also hands the epoch
    to the dataset, which derives each sample's augmentation seed from it."""

    def __iter__(self) -> Iterator:
        epoch = self.epoch
        return ((index, epoch) for index in super().__iter__())


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


def _seed_worker(worker_id: int) -> None:
    # torch seeds each worker from the loader's generator; give numpy and random the same
    # seed for user transforms that draw from them.
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


def train_loader(dataset: Dataset, batch_size: int, rank: int, world_size: int, seed: int,
                 workers: int, pin_memory: bool) -> DataLoader:
    sampler = EpochSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=True)
    generator = torch.Generator().manual_seed(seed * 1000 + rank)  # worker base seeds differ by rank
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                      pin_memory=pin_memory, drop_last=True, collate_fn=collate,
                      persistent_workers=workers > 0, worker_init_fn=_seed_worker, generator=generator,
                      prefetch_factor=4 if workers > 0 else None)


def eval_loader(dataset: Dataset, batch_size: int, rank: int, world_size: int, workers: int,
                pin_memory: bool, persistent: bool = True) -> DataLoader:
    sampler = ShardSampler(len(dataset), rank, world_size)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                      pin_memory=pin_memory, drop_last=False, collate_fn=collate,
                      persistent_workers=persistent and workers > 0)
