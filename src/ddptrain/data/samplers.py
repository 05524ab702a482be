"""Samplers: disjoint, reshuffled training shards that can resume mid-epoch, and exactly-once evaluation."""

from __future__ import annotations

from typing import Iterator, List, Tuple

import torch
from torch.utils.data import Sampler


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
        remaining = self.permutation()[self.start : self.start + self._usable()]
        epoch = self.epoch
        return ((index, epoch) for index in remaining[self.rank :: self.world_size])

    def __len__(self) -> int:
        return self._usable() // self.world_size


class IndexSampler(EpochSampler):
    """EpochSampler for datasets that take a plain index (any map-style dataset, e.g. ImageFolder)."""

    def __iter__(self) -> Iterator[int]:  # type: ignore[override]
        return (index for index, _ in super().__iter__())


class ShardSampler(Sampler):
    """Each index goes to exactly one rank: no padding, no duplicates. Ranks may get uneven counts,
    or none at all, so evaluation must not run collectives per batch (see train.evaluate)."""

    def __init__(self, length: int, rank: int, world_size: int):
        self.indices = list(range(rank, length, world_size))

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)
