"""Start N worker processes through torchrun's own API (`torch.distributed.run`).

The workers re-run the same `ddptrain` command line; `DDPTRAIN_WORKER=1` in their environment
tells them to do the work instead of launching again.
"""
from __future__ import annotations

import os
import socket
import sys
from typing import List, Optional, Sequence

import torch

from .dist import available_cpus
from .errors import ConfigError, LaunchError

WORKER_ENV = "DDPTRAIN_WORKER"


def inside_worker() -> bool:
    """True inside a process started by our launcher, by torchrun or by SLURM's srun."""
    return os.environ.get(WORKER_ENV) == "1" or "LOCAL_RANK" in os.environ or (
        "RANK" in os.environ and "WORLD_SIZE" in os.environ)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def check_port_free(port: int) -> None:
    """Node 0 hosts the rendezvous on this port: say so now if something else holds it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("", port))
        except OSError as error:
            raise ConfigError(f"--master-port {port} is already in use on this machine ({error.strerror}); "
                              "choose another port, or omit --master-port to get a free one") from None


def check_nproc(nproc: int, device_kind: str) -> None:
    """Refuse impossible process counts before any process starts."""
    if device_kind == "cuda":
        visible = torch.cuda.device_count()
        if nproc > visible:
            raise ConfigError(f"--nproc {nproc} needs {nproc} GPUs but {visible} are visible; "
                              f"use --nproc {max(visible, 1)} or --device cpu")


def torchrun_argv(nproc: int, nnodes: int, node_rank: int, master_addr: Optional[str],
                  master_port: Optional[int], max_restarts: int, worker_argv: Sequence[str]) -> List[str]:
    """Arguments for torchrun: static rendezvous on MASTER_ADDR:MASTER_PORT."""
    if nnodes > 1 and not master_addr:
        raise ConfigError("--nnodes > 1 needs --master-addr (the address of node 0, reachable from every node)")
    addr = master_addr or "127.0.0.1"  # IPv4 loopback: avoids IPv6 'Address family not supported'
    if master_port and node_rank == 0:
        check_port_free(master_port)
    port = master_port or (free_port(addr) if nnodes == 1 else 29500)
    return [
        f"--nproc-per-node={nproc}", f"--nnodes={nnodes}", f"--node-rank={node_rank}",
        f"--master-addr={addr}", f"--master-port={port}", f"--max-restarts={max_restarts}",
        "--rdzv-backend=static", "--no-python",
        sys.executable, "-m", "ddptrain", *worker_argv,
    ]


def parse_torchrun_argv(argv: Sequence[str]):
    """torchrun's own parser, given the launcher options only: argparse would otherwise read worker
    flags such as --nproc as ambiguous abbreviations of torchrun's options."""
    from torch.distributed import run as torchrun

    script_at = argv.index("--no-python") + 1
    args = torchrun.get_args_parser().parse_args(list(argv[:script_at + 1]))
    args.training_script_args = list(argv[script_at + 1:])
    return args


def launch(nproc: int, nnodes: int, node_rank: int, master_addr: Optional[str], master_port: Optional[int],
           max_restarts: int, worker_argv: Sequence[str]) -> int:
    """Run the workers to completion; return 0 on success, raise LaunchError naming the failed rank."""
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    argv = torchrun_argv(nproc, nnodes, node_rank, master_addr, master_port, max_restarts, worker_argv)
    os.environ[WORKER_ENV] = "1"
    # An even share of the cores per process; torchrun would otherwise force 1 thread each.
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, available_cpus() // nproc)))
    try:
        torchrun.run(parse_torchrun_argv(argv))
    except ChildFailedError as failure:
        raise LaunchError(_describe_failure(failure)) from None
    finally:
        os.environ.pop(WORKER_ENV, None)
    return 0


def _describe_failure(failure) -> str:
    lines = []
    for rank, info in sorted(failure.failures.items()):  # keyed by global rank
        lines.append(f"rank {rank} (local {info.local_rank}, pid {info.pid}) exited with code {info.exitcode}")
    return ("worker processes failed: " + "; ".join(lines)
            + ". The failing rank's error is printed above; fix it and rerun (add --resume auto to continue).")
