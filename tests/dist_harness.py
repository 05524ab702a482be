"""Run a function on W real processes joined by a gloo process group set up by ddptrain.runtime.dist.

Each rank calls `fn(rt, *args)` with a live `ddptrain.runtime.dist.Runtime`; what it returns (tensors,
numbers, lists, dicts) comes back to the test as a list indexed by rank.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable, List

import torch
import torch.multiprocessing as mp

from ddptrain.runtime import dist
from ddptrain.runtime.env import DistEnv
from ddptrain.runtime.launch import free_port


def _entry(rank: int, fn: Callable, world_size: int, port: int, out_dir: str, args: tuple) -> None:
    torch.set_num_threads(1)
    env = DistEnv(
        rank=rank,
        local_rank=rank,
        world_size=world_size,
        local_world_size=world_size,
        master_addr="127.0.0.1",
        master_port=port,
        launcher="test",
    )
    rt = dist.setup(env, "cpu", timeout_s=120)
    try:
        torch.save(fn(rt, *args), Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.cleanup()


def run_ranks(fn: Callable, world_size: int, *args: Any) -> List[Any]:
    with tempfile.TemporaryDirectory() as out_dir:
        mp.start_processes(
            _entry,
            args=(fn, world_size, free_port(), out_dir, args),
            nprocs=world_size,
            start_method="spawn",
            join=True,
        )
        return [torch.load(Path(out_dir) / f"rank{r}.pt", weights_only=True) for r in range(world_size)]


def run_single(fn: Callable, *args: Any) -> Any:
    """The same function in this process as a world of one (ddptrain's single-process path)."""
    rt = dist.setup(DistEnv(), "cpu", timeout_s=120)
    try:
        return fn(rt, *args)
    finally:
        dist.cleanup()


def epoch_names(rt, location: str, epochs: int, cache: str = "") -> List[List[str]]:
    """On one rank: the names of the training samples of --data `location` (split 0.25, seed 3) that the epoch
    sampler gives this rank in each of `epochs` epochs, in order."""
    import os

    from ddptrain.data.samplers import EpochSampler
    from ddptrain.data.sources import load_split

    if cache:
        os.environ["DDPTRAIN_SHARD_CACHE"] = cache
    train = load_split(location, 0.25, 3).train
    sampler = EpochSampler(len(train), rt.rank, rt.world_size, seed=0, shard_sizes=getattr(train, "shard_sizes", None))
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen.append([train.relative(index) for index, _, _ in sampler])
    return seen
