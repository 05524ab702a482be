"""Samplers: disjoint, reshuffled training shards that can resume mid-epoch (optionally with repeated augmentation),
and exactly-once evaluation."""

from __future__ import annotations

from typing import Iterator, List, Tuple

import torch
from torch.utils.data import Sampler


class EpochSampler(Sampler):
    """Disjoint training shards, reshuffled by (seed, epoch), the uneven tail dropped; yields
    (index, epoch, copy) so the dataset derives each sample's augmentation seed from it.

    The epoch is a stream of `length` positions, the same for every world size; rank r takes positions
    r, r+W, ... With `repeats` K > 1 (repeated augmentation, as in DeiT) the stream holds each index of the
    epoch's permutation K times in a row, copies 0..K-1 with their own augmentation draws, and is cut at
    `length` positions so an epoch keeps its size (about length/K distinct images, each K times). K
    consecutive positions go to K consecutive ranks: with K <= W every index's copies are on different
    ranks, at the same step.

    After `set_epoch(epoch, start)` the first `start` positions count as already consumed: the
    remainder is sharded again over the current ranks, so a run stopped mid-epoch continues without
    repeating or skipping a position, with the same or with another number of processes."""

    def __init__(self, length: int, rank: int, world_size: int, seed: int, repeats: int = 1):
        if repeats < 1:
            raise ValueError(f"repeats must be 1 or more, not {repeats}")
        self.length, self.rank, self.world_size, self.seed = length, rank, world_size, seed
        self.repeats = repeats
        self.epoch, self.start = 0, 0

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        self.epoch, self.start = epoch, min(max(0, start), self.length)

    def permutation(self) -> List[int]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return torch.randperm(self.length, generator=generator).tolist()

    def _usable(self) -> int:
        return (self.length - self.start) // self.world_size * self.world_size

    def __iter__(self) -> Iterator[Tuple[int, int, int]]:
        order, epoch, repeats = self.permutation(), self.epoch, self.repeats
        positions = range(self.start + self.rank, self.start + self._usable(), self.world_size)
        return ((order[position // repeats], epoch, position % repeats) for position in positions)

    def __len__(self) -> int:
        return self._usable() // self.world_size


class IndexSampler(EpochSampler):
    """EpochSampler for datasets that take a plain index (any map-style dataset, e.g. ImageFolder)."""

    def __iter__(self) -> Iterator[int]:  # type: ignore[override]
        return (index for index, _, _ in super().__iter__())


class ShardSampler(Sampler):
    """Each index goes to exactly one rank: no padding, no duplicates. Ranks may get uneven counts,
    or none at all, so evaluation must not run collectives per batch (see train.evaluate)."""

    def __init__(self, length: int, rank: int, world_size: int):
        self.indices = list(range(rank, length, world_size))

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)
