"""The process group: set-up and tear-down, this process's device, the timeout policy, and the few
collectives ddptrain uses.

Every process runs the same code: a single process is simply world size 1 with a one-member process
group, so there is no separate non-distributed branch to drift out of step.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Tuple, Type, TypeVar

import torch
import torch.distributed as dist

from ..errors import ConfigError, DdptrainError
from .env import DistEnv

STARTUP_TIMEOUT_S = 1800.0


@dataclass
class Runtime:
    """The live process group and the device this process computes on."""

    env: DistEnv
    device: torch.device
    backend: str
    store: Optional[dist.Store] = None  # the job's key-value store (heartbeats)
    steady_timeout_s: Optional[float] = None  # collective timeout once the first step has run
    timeout_is_steady: bool = False
    heartbeat: Any = field(default=None, repr=False, compare=False)  # runtime.heartbeat.Heartbeat.of(self)

    @property
    def rank(self) -> int:
        return self.env.rank

    @property
    def world_size(self) -> int:
        return self.env.world_size

    @property
    def is_main(self) -> bool:
        return self.env.is_main

    def use_steady_timeout(self) -> None:
        """From now on collectives wait --dist-timeout, not the start-up allowance. Called once the first
        optimizer step has completed on this rank (later calls do nothing)."""
        if not self.timeout_is_steady and self.steady_timeout_s is not None and self.world_size > 1:
            set_collective_timeout(self.steady_timeout_s)
        self.timeout_is_steady = True


def resolve_device_kind(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was requested but CUDA is not available here; use --device cpu")
    return requested


def setup(env: DistEnv, device_kind: str, timeout_s: float) -> Runtime:
    """Pin the device, then create the process group (nccl on CUDA, gloo on CPU).

    Timeout policy: until the first training step completes, collectives may wait
    max(timeout_s, 30 min) — nodes start at different times and scan data at different speeds;
    afterwards `timeout_s` (--dist-timeout), so a stalled or dead peer fails the job quickly."""
    kind = resolve_device_kind(device_kind)
    if kind == "cuda":
        # Must happen before anything touches CUDA, or every rank piles onto GPU 0.
        if env.local_rank >= torch.cuda.device_count():
            raise ConfigError(
                f"local rank {env.local_rank} has no GPU ({torch.cuda.device_count()} visible); "
                "start fewer processes per node",
                rank=env.rank,
            )
        torch.cuda.set_device(env.local_rank)
        torch.backends.cudnn.benchmark = True  # fixed input sizes: pick the fastest convolution kernels once
        device, backend = torch.device("cuda", env.local_rank), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    timeout = datetime.timedelta(seconds=max(timeout_s, STARTUP_TIMEOUT_S))
    if env.world_size == 1 and env.launcher == "single":
        store: dist.Store = dist.HashStore()
    else:
        store = _job_store(env, timeout)
    dist.init_process_group(backend, store=store, rank=env.rank, world_size=env.world_size, timeout=timeout)
    return Runtime(env=env, device=device, backend=backend, store=store, steady_timeout_s=timeout_s)


def set_collective_timeout(timeout_s: float) -> None:
    setter = getattr(dist, "set_timeout", None) or getattr(dist.distributed_c10d, "_set_pg_timeout", None)
    if setter is not None:  # torch versions without it keep the start-up timeout
        setter(datetime.timedelta(seconds=timeout_s))


def _job_store(env: DistEnv, timeout: datetime.timedelta) -> dist.Store:
    """The rendezvous store, with a key prefix per restart attempt.

    torchrun's static rendezvous keeps one store for the whole job; after a restart the new workers
    would read the dead attempt's addresses under the same keys and the process group would never
    form. Under torchrun the agent hosts the store; under SLURM or a plain launch, rank 0 does."""
    _export_master(env)
    agent_hosts_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True)
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        env.world_size,
        is_master=env.rank == 0 and not agent_hosts_store,
        timeout=timeout,
    )
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(f"ddptrain/attempt{attempt}", store)


def _export_master(env: DistEnv) -> None:
    if env.master_addr:
        os.environ.setdefault("MASTER_ADDR", env.master_addr)
    if env.master_port:
        os.environ.setdefault("MASTER_PORT", str(env.master_port))
    if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
        raise ConfigError(
            "MASTER_ADDR/MASTER_PORT are not set; start with `ddptrain train --nproc N` or torchrun", rank=env.rank
        )


def cleanup() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum a tensor over every rank, in place; every rank must call this."""
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def barrier() -> None:
    """Every rank waits here. On NCCL the barrier runs on this process's GPU, named (left unnamed, torch warns at
    every call that it uses the current device)."""
    if dist.get_backend() == "nccl":
        dist.barrier(device_ids=[torch.cuda.current_device()])
    else:
        dist.barrier()


def any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank when `flag` is true on at least one; every rank must call this."""
    return all_reduce_sum(torch.tensor([float(flag)], device=device)).item() > 0


def gather_objects(obj) -> list:
    """Every rank's `obj`, in rank order, on every rank (small picklable objects only)."""
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


def broadcast_object(obj, src: int = 0):
    """`src`'s `obj` on every rank (pickled; numpy arrays travel as one buffer)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


T = TypeVar("T")


def computed_on_main(rt: Runtime, compute: Callable[[], T], what: str) -> T:
    """`compute()` run on rank 0 alone and its result on every rank (pickled: numpy arrays travel as one buffer), so
    N ranks do not list or read a network file system N times. Every rank must call this. A failure there is raised
    on every rank, nobody left waiting: on rank 0 as it was, on the others as the same kind of error with its
    message (`what`: what rank 0 was doing, for a failure that is not ddptrain's own)."""
    outcome: Tuple[Optional[T], Optional[Tuple[Type[DdptrainError], str]]] = (None, None)
    failure: Optional[BaseException] = None
    if rt.is_main:
        try:
            outcome = (compute(), None)
        except DdptrainError as error:
            outcome, failure = (None, (type(error), str(error))), error
        except Exception as error:  # sent on as one line, then raised here as it was (its traceback on rank 0)
            outcome, failure = (None, (DdptrainError, f"rank 0 failed {what}: {type(error).__name__}: {error}")), error
    value, failed = broadcast_object(outcome)
    if failure is not None:
        raise failure
    if failed is not None:
        kind, message = failed
        raise kind(message, rank=rt.rank, every_rank=True)
    return value


def broadcast_buffers(module: torch.nn.Module, src: int = 0) -> None:
    """Give every rank `src`'s buffers (BatchNorm running statistics).

    DDP broadcasts buffers at the start of each forward, so after the last training step every rank
    holds statistics updated by its own last batch. Evaluating or saving without this would use a
    different model on each rank than the one rank 0 writes to disk."""
    for buffer in module.buffers():
        dist.broadcast(buffer, src=src)
