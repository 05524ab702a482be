"""ddptrain's DDP pieces for your own training script, without its CLI or trainer.

    import ddptrain
    device = ddptrain.setup()                                # process group + this rank's device
    model = ddptrain.prepare_model(model)                    # device, optional SyncBN, DDP
    train_loader = ddptrain.train_loader(train_set, batch_size=32)  # disjoint shards, reshuffled each epoch
    val_loader = ddptrain.eval_loader(val_set, batch_size=64)       # every sample on exactly one rank
    correct, total = ddptrain.reduce_sum(correct, total)     # exact totals over all ranks
    ddptrain.save_checkpoint("model.pt", model, optimizer, epoch=epoch)  # rank 0, unwrapped, atomic
    if ddptrain.is_main(): print(...)

Start the script with `torchrun --nproc-per-node N script.py ...` (or plain `python` for one process).
"""

from __future__ import annotations

import atexit
from typing import Any, Dict, Iterator, Optional, Sized, Union, cast

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from .data import loaders, sources
from .data.samplers import IndexSampler
from .data.split import Split
from .errors import DdptrainError
from .models import compile_model, place_model, wrap_ddp
from .models import unwrap as _unwrap
from .runtime import dist
from .runtime.env import detect
from .train import checkpointer
from .train.state import TrainState, library_checkpoint

_runtime: Optional[dist.Runtime] = None


def setup(device: str = "auto", timeout_s: float = 1800.0) -> torch.device:
    """Join the job the launcher started (torchrun, SLURM, or none: one process) and return this
    rank's device: `cuda:LOCAL_RANK` (pinned before anything touches CUDA) or `cpu`. Collectives
    fail after `timeout_s` instead of hanging. The process group is closed at exit."""
    global _runtime
    if _runtime is None:
        _runtime = dist.setup(detect(), device, timeout_s)
        atexit.register(cleanup)
    return _runtime.device


def runtime() -> dist.Runtime:
    if _runtime is None:
        raise DdptrainError("call ddptrain.setup() first: it joins the process group and picks this rank's device")
    return _runtime


def cleanup() -> None:
    """Close the process group (also done at exit)."""
    global _runtime
    dist.cleanup()
    _runtime = None


def rank() -> int:
    return runtime().rank if _runtime else detect().rank


def world_size() -> int:
    return runtime().world_size if _runtime else detect().world_size


def is_main() -> bool:
    """True on global rank 0, the process that prints, logs and writes files."""
    return rank() == 0


def prepare_model(
    model: nn.Module,
    sync_bn: bool = False,
    channels_last: bool = False,
    compile: bool = False,
    grad_compress: str = "off",
) -> nn.Module:
    """Move the model to this rank's device (SyncBatchNorm first when asked and world size > 1),
    optionally torch.compile it, and wrap it in DistributedDataParallel, which makes every rank
    start from rank 0's weights and averages gradients during backward()."""
    rt = runtime()
    model = place_model(model, rt.device, rt.world_size, sync_bn, channels_last)
    if compile:
        model = compile_model(model)
    return wrap_ddp(model, rt.device, grad_compress)


def unwrap(model: nn.Module) -> nn.Module:
    """The plain model inside DDP / torch.compile (for saving, or calling custom methods)."""
    return _unwrap(model)


class EpochLoader:
    """A DataLoader whose every pass is the next epoch: the sampler's shuffle changes each epoch
    (the same order on every rank), so forgetting `set_epoch` cannot happen. After resuming, call
    `set_epoch(e)` once to continue at epoch e."""

    def __init__(self, loader: DataLoader):
        self.loader, self.epoch = loader, 0

    @property
    def sampler(self) -> IndexSampler:
        return cast(IndexSampler, self.loader.sampler)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator:
        self.sampler.set_epoch(self.epoch)
        self.epoch += 1
        return iter(self.loader)

    def __len__(self) -> int:
        return len(self.loader)


def load_data(location: str, val_split: float = 0.2, seed: int = 42) -> Split:
    """The classes and the train/validation samples of any --data a `ddptrain train` reads (a folder, a manifest, a
    shard set or its URL), split the way train splits it: `split.classes`, and `split.train` / `split.val` as
    samples that `ddptrain.data.datasets.ImageDataset` reads."""
    return sources.load_split(location, val_split, seed)


def train_loader(
    dataset: Dataset, batch_size: int, seed: int = 0, num_workers: int = 2, **loader_kwargs: Any
) -> EpochLoader:
    """Training batches of `batch_size` per rank: each rank a disjoint shard of a fresh shuffle per
    epoch, the uneven tail dropped (no rank waits on another's extra batch). Worker random seeds
    differ by rank, so random augmentations do too."""
    rt = runtime()
    sampler = IndexSampler(len(cast(Sized, dataset)), rt.rank, rt.world_size, seed)
    settings = loaders.LoaderSettings(
        batch_size, num_workers, pin_memory=rt.device.type == "cuda", normalize_in_workers=False
    )
    return EpochLoader(loaders.train_loader(dataset, sampler, settings, seed, rt.rank, **loader_kwargs))


def eval_loader(dataset: Dataset, batch_size: int, num_workers: int = 2, **loader_kwargs: Any) -> DataLoader:
    """Evaluation batches: each sample on exactly one rank, no padding and no duplicates, so sums
    reduced with `reduce_sum` are exact. Ranks may get different batch counts: reduce once after
    the loop, never per batch."""
    rt = runtime()
    settings = loaders.LoaderSettings(
        batch_size, num_workers, pin_memory=rt.device.type == "cuda", normalize_in_workers=False
    )
    return loaders.eval_loader(dataset, rt.rank, rt.world_size, settings, persistent=False, **loader_kwargs)


Number = Union[int, float, torch.Tensor]


def reduce_sum(*values: Number):
    """Sum each value over all ranks, exactly (float64, one collective); every rank must call it.
    Returns one number for one value, else a tuple; integers stay integers."""
    rt = runtime()
    floats = [v.detach().double().sum().item() if isinstance(v, torch.Tensor) else float(v) for v in values]
    totals = dist.all_reduce_sum(torch.tensor(floats, dtype=torch.float64, device=rt.device)).tolist()
    out = tuple(int(round(t)) if isinstance(v, int) else t for v, t in zip(values, totals))
    return out[0] if len(out) == 1 else out


def save_checkpoint(
    path: str, model: nn.Module, optimizer: Optional[torch.optim.Optimizer] = None, **extra: Any
) -> None:
    """Rank 0 writes {model (unwrapped: loads into a plain model), optimizer, **extra} atomically;
    every rank waits until the file is complete. Call it on every rank."""
    rt = runtime()
    if rt.is_main:
        state = library_checkpoint(unwrap(model).state_dict(), optimizer.state_dict() if optimizer else None, extra)
        checkpointer.save_atomic(state, path)
    dist.barrier()


def load_checkpoint(path: str, model: nn.Module, optimizer: Optional[torch.optim.Optimizer] = None) -> Dict:
    """Load a checkpoint written by `save_checkpoint` (or ddptrain train) into `model` (wrapped or
    not) and `optimizer`, safely (tensors only, via the CPU); return everything it holds."""
    raw = checkpointer.load_raw(path)
    state = TrainState.from_dict(raw, path)
    unwrap(model).load_state_dict(state.model)
    if optimizer is not None and state.optimizer is not None:
        optimizer.load_state_dict(state.optimizer)
    return raw
