"""Samplers: disjoint, reshuffled training shards that can resume mid-epoch (optionally with repeated augmentation),
and exactly-once evaluation."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.utils.data import Sampler


def lane_order(shard_sizes: Sequence[int], generator: torch.Generator, lanes: int) -> List[int]:
    """An epoch's order over samples stored in shards (samples of shard s are a contiguous index range),
    laid out so that rank r of `lanes` ranks reads a run of whole shards one after another.

    The shards are shuffled, and the samples inside each; the resulting sequence is cut into `lanes`
    consecutive runs of (nearly) equal length, and stream position p takes element p // lanes of run
    p % lanes. Every sample appears once; with `lanes` ranks, rank r's positions r, r+lanes, ... are run r in
    order. Another number of ranks (a resume) reads the same positions, only with less locality."""
    starts = np.concatenate([[0], np.cumsum(shard_sizes)]).astype(np.int64)
    pieces = []
    for shard in torch.randperm(len(shard_sizes), generator=generator).tolist():
        inside = torch.randperm(int(shard_sizes[shard]), generator=generator).numpy()
        pieces.append(starts[shard] + inside)
    sequence = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    total = len(sequence)
    base, extra = divmod(total, lanes)
    run_start = np.arange(lanes) * base + np.minimum(np.arange(lanes), extra)
    positions = np.arange(total)
    return sequence[run_start[positions % lanes] + positions // lanes].tolist()


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
    repeating or skipping a position, with the same or with another number of processes.

    With `weights` (--sampler balanced) the epoch's stream is instead `length` draws with replacement, each sample
    with probability proportional to its weight, by (seed, epoch): the same length, the same sharding and resume;
    a sample drawn again is its next copy (its own augmentation draws)."""

    def __init__(
        self,
        length: int,
        rank: int,
        world_size: int,
        seed: int,
        repeats: int = 1,
        shard_sizes: Optional[Sequence[int]] = None,
        weights: Optional[Any] = None,  # per-sample draw weights (a sequence or an array)
    ):
        if repeats < 1:
            raise ValueError(f"repeats must be 1 or more, not {repeats}")
        if weights is not None and (repeats > 1 or shard_sizes is not None):
            raise ValueError("a weighted draw takes neither repeated augmentation nor whole shards")
        self.weights = torch.as_tensor(weights, dtype=torch.float64) if weights is not None else None
        self.length, self.rank, self.world_size, self.seed = length, rank, world_size, seed
        self.repeats = repeats
        self.shard_sizes = list(shard_sizes) if shard_sizes is not None else None
        self.epoch, self.start, self.lanes = 0, 0, world_size
        self.prefetcher: Optional[Any] = (
            None  # remote shards: fetches the shards of this rank's order ahead (data/prefetch.py)
        )

    def set_epoch(self, epoch: int, start: int = 0, lanes: int = 0) -> None:
        """Epoch `epoch` from stream position `start`. `lanes`: the number of processes the epoch began on
        (sharded data lays the epoch out for them; 0: this run's)."""
        self.epoch, self.start = epoch, min(max(0, start), self.length)
        self.lanes = lanes or self.world_size

    def permutation(self) -> List[int]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        if self.weights is not None:
            return torch.multinomial(self.weights, self.length, replacement=True, generator=generator).tolist()
        if self.shard_sizes is not None:
            return lane_order(self.shard_sizes, generator, self.lanes)
        return torch.randperm(self.length, generator=generator).tolist()

    def _usable(self) -> int:
        return (self.length - self.start) // self.world_size * self.world_size

    def __iter__(self) -> Iterator[Tuple[int, int, int]]:
        order, epoch, repeats = self.permutation(), self.epoch, self.repeats
        positions = range(self.start + self.rank, self.start + self._usable(), self.world_size)
        if self.weights is not None:
            copies = _occurrences(order)
            items = ((order[position], epoch, copies[position]) for position in positions)
            return items
        items = ((order[position // repeats], epoch, position % repeats) for position in positions)
        if self.prefetcher is None:
            return items
        return self.prefetcher.follow(items, [order[position // repeats] for position in positions])

    def __len__(self) -> int:
        return self._usable() // self.world_size


def _occurrences(order: Sequence[int]) -> List[int]:
    """For each position, how many times its index came before it in `order`."""
    seen: Dict[int, int] = {}
    counts = []
    for index in order:
        counts.append(seen.get(index, 0))
        seen[index] = counts[-1] + 1
    return counts


class IndexSampler(EpochSampler):
    """EpochSampler for datasets that take a plain index (any map-style dataset, e.g. ImageFolder)."""

    def __iter__(self) -> Iterator[int]:  # type: ignore[override]
        return (index for index, _, _ in super().__iter__())


class ExactEvalSampler(Sampler):
    """Each index goes to exactly one rank: no padding, no duplicates. Ranks may get uneven counts,
    or none at all, so evaluation must not run collectives per batch (see train.evaluate). `contiguous`:
    rank r takes the r-th of W consecutive runs (for sharded data: a rank reads whole shards)."""

    def __init__(self, length: int, rank: int, world_size: int, contiguous: bool = False):
        if contiguous:
            base, extra = divmod(length, world_size)
            first = rank * base + min(rank, extra)
            self.indices = list(range(first, first + base + (rank < extra)))
        else:
            self.indices = list(range(rank, length, world_size))

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)
