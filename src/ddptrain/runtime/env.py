"""Where this process sits in the job, read from the launcher's environment — without torch, so the
command line can name a rank (and decide whether to launch) before anything heavy is imported."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping, Optional

from ..errors import ConfigError

WORKER_ENV = "DDPTRAIN_WORKER"  # set by ddptrain's launcher for the workers it starts
LAUNCH_DIR_ENV = "DDPTRAIN_LAUNCH_DIR"  # the launcher's own scratch folder on this node, removed when it ends


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


def inside_worker(environ: Mapping[str, str] = os.environ) -> bool:
    """True inside a process started by our launcher, by torchrun or by SLURM's srun."""
    return environ.get(WORKER_ENV) == "1" or "LOCAL_RANK" in environ or ("RANK" in environ and "WORLD_SIZE" in environ)


def restart_count(environ: Mapping[str, str] = os.environ) -> int:
    """How many times torchrun has restarted this job's workers (--max-restarts)."""
    return int(environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)


def _int(environ: Mapping[str, str], key: str, default: Optional[int] = None) -> int:
    value = environ.get(key)
    if value is None or value == "":
        if default is None:
            raise ConfigError(f"{key} is not set in the environment; start with torchrun, srun or ddptrain --nproc")
        return default
    return int(value)


def _optional_int(environ: Mapping[str, str], key: str) -> Optional[int]:
    value = environ.get(key)
    return int(value) if value else None


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
            master_port=_optional_int(environ, "MASTER_PORT"),
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
        raise ConfigError(
            "running under SLURM but neither MASTER_ADDR nor SLURM_JOB_NODELIST is set; "
            "export MASTER_ADDR to the first node's hostname"
        )
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
