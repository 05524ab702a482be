"""How this process was started, process-group set-up and tear-down, and the collectives we use.

Every process runs the same code: a single process is simply world size 1 with a one-member
process group, so there is no separate non-distributed branch to drift out of step.
"""
from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass
from typing import Mapping, Optional

import torch
import torch.distributed as dist

from .errors import ConfigError


@dataclass(frozen=True)
class DistEnv:
    """Where this process sits in the job, read from the launcher's environment."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    master_addr: Optional[str] = None
    master_port: Optional[int] = None
    launcher: str = "single"  # torchrun | launch | slurm | single

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _int(environ: Mapping[str, str], key: str, default: Optional[int] = None) -> Optional[int]:
    value = environ.get(key)
    return int(value) if value not in (None, "") else default


def detect(environ: Mapping[str, str] = os.environ, local_rank_arg: Optional[int] = None) -> DistEnv:
    """Work out how we were started: torchrun / launch --use-env, legacy --local-rank, SLURM, or alone."""
    if "RANK" in environ and "WORLD_SIZE" in environ:
        local_rank = _int(environ, "LOCAL_RANK", local_rank_arg if local_rank_arg is not None else 0)
        launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in environ or "LOCAL_RANK" in environ else "launch"
        world = _int(environ, "WORLD_SIZE")
        return DistEnv(
            rank=_int(environ, "RANK"),
            local_rank=local_rank,
            world_size=world,
            local_world_size=_int(environ, "LOCAL_WORLD_SIZE", world),
            master_addr=environ.get("MASTER_ADDR"),
            master_port=_int(environ, "MASTER_PORT"),
            launcher=launcher,
        )
    if "SLURM_PROCID" in environ and _int(environ, "SLURM_NTASKS", 1) > 1:
        return _detect_slurm(environ)
    return DistEnv()


def _detect_slurm(environ: Mapping[str, str]) -> DistEnv:
    """One task per device under srun: ranks come from SLURM, the master is the first node."""
    nodelist = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    master = environ.get("MASTER_ADDR") or (first_slurm_host(nodelist) if nodelist else None)
    if not master:
        raise ConfigError("running under SLURM but neither MASTER_ADDR nor SLURM_JOB_NODELIST is set; "
                          "export MASTER_ADDR to the first node's hostname")
    job_id = _int(environ, "SLURM_JOB_ID", 0)
    tasks_per_node = environ.get("SLURM_NTASKS_PER_NODE", "").split("(")[0]
    return DistEnv(
        rank=_int(environ, "SLURM_PROCID"),
        local_rank=_int(environ, "SLURM_LOCALID", 0),
        world_size=_int(environ, "SLURM_NTASKS"),
        local_world_size=int(tasks_per_node) if tasks_per_node.isdigit() else _int(environ, "SLURM_NTASKS"),
        master_addr=master,
        # A port derived from the job id: stable for every task of the job, different between jobs.
        master_port=_int(environ, "MASTER_PORT", 15000 + job_id % 20000),
        launcher="slurm",
    )


def first_slurm_host(nodelist: str) -> str:
    """First host of a SLURM node list such as 'gpu[03-05,07],cpu1' -> 'gpu03'."""
    head = re.match(r"([^,\[]+)(\[([^\]]+)\])?", nodelist.strip())
    if not head:
        raise ConfigError(f"cannot parse SLURM node list {nodelist!r}; export MASTER_ADDR explicitly")
    prefix, _, ranges = head.groups()
    if not ranges:
        return prefix
    first = ranges.split(",")[0].split("-")[0]
    return prefix + first


@dataclass
class Runtime:
    """The live process group and the device this process computes on."""

    env: DistEnv
    device: torch.device
    backend: str
    store: Optional[dist.Store] = None  # the job's key-value store (heartbeats)
    steady_timeout_s: Optional[float] = None  # collective timeout once the first step has run
    timeout_is_steady: bool = False

    @property
    def rank(self) -> int:
        return self.env.rank

    @property
    def world_size(self) -> int:
        return self.env.world_size

    @property
    def is_main(self) -> bool:
        return self.env.is_main


def resolve_device_kind(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was requested but CUDA is not available here; use --device cpu")
    return requested


STARTUP_TIMEOUT_S = 1800.0


def setup(env: DistEnv, device_kind: str, timeout_s: float) -> Runtime:
    """Pin the device, then create the process group (nccl on CUDA, gloo on CPU).

    Timeout policy: until the first training step completes, collectives may wait
    max(timeout_s, 30 min) — nodes start at different times and scan data at different speeds;
    afterwards `timeout_s` (--dist-timeout), so a stalled or dead peer fails the job quickly."""
    kind = resolve_device_kind(device_kind)
    if kind == "cuda":
        # Must happen before anything touches CUDA, or every rank piles onto GPU 0.
        if env.local_rank >= torch.cuda.device_count():
            raise ConfigError(f"rank {env.rank}: local rank {env.local_rank} has no GPU "
                              f"({torch.cuda.device_count()} visible); start fewer processes per node")
        torch.cuda.set_device(env.local_rank)
        torch.backends.cudnn.benchmark = True  # fixed input sizes: pick the fastest convolution kernels once
        device, backend = torch.device("cuda", env.local_rank), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    timeout = datetime.timedelta(seconds=max(timeout_s, STARTUP_TIMEOUT_S))
    if env.world_size == 1 and env.launcher == "single":
        store = dist.HashStore()
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
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), env.world_size,
                          is_master=env.rank == 0 and not agent_hosts_store, timeout=timeout)
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(f"ddptrain/attempt{attempt}", store)


def _export_master(env: DistEnv) -> None:
    if env.master_addr:
        os.environ.setdefault("MASTER_ADDR", env.master_addr)
    if env.master_port:
        os.environ.setdefault("MASTER_PORT", str(env.master_port))
    if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
        raise ConfigError(f"rank {env.rank}: MASTER_ADDR/MASTER_PORT are not set; "
                          "start with `ddptrain train --nproc N` or torchrun")


def cleanup() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum a tensor over every rank, in place; every rank must call this."""
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def barrier() -> None:
    dist.barrier()


def any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank when `flag` is true on at least one; every rank must call this."""
    return all_reduce_sum(torch.tensor([float(flag)], device=device)).item() > 0


def gather_objects(obj) -> list:
    """Every rank's `obj`, in rank order, on every rank (small picklable objects only)."""
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


def broadcast_buffers(module: torch.nn.Module, src: int = 0) -> None:
    """Give every rank `src`'s buffers (BatchNorm running statistics).

    DDP broadcasts buffers at the start of each forward, so after the last training step every rank
    holds statistics updated by its own last batch. Evaluating or saving without this would use a
    different model on each rank than the one rank 0 writes to disk."""
    for buffer in module.buffers():
        dist.broadcast(buffer, src=src)


def cpus_per_process(local_world_size: int) -> int:
    """CPU cores this process may use: the launcher's OMP_NUM_THREADS, else an even share."""
    from_env = os.environ.get("OMP_NUM_THREADS", "")
    if from_env.isdigit() and int(from_env) > 0:
        return int(from_env)
    return max(1, available_cpus() // max(1, local_world_size))


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
