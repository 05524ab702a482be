"""Start this node's worker processes through torchrun's own API (`torch.distributed.run`).

The workers re-run the same `ddptrain` command line; `DDPTRAIN_WORKER=1` in their environment tells
them to do the work instead of launching again. What can be checked before any process starts
(`check_nproc`, `network_environment`) is checked here, and torch is imported only when needed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Mapping, Optional, Sequence

from ..config import LaunchConfig
from ..errors import ConfigError, DdptrainError, LaunchError
from ..util import counted, first_line
from .env import LAUNCH_DIR_ENV, WORKER_ENV, available_cpus
from .explain import explain
from .preempt import EXIT_INTERRUPTED, EXIT_PREEMPTED, Preempted
from .startup import mark_launch

LOOPBACK = "127.0.0.1"
log = logging.getLogger("ddptrain")
TORCHRUN_LOGGERS = ("torch.distributed.elastic", "torch.distributed.run", "torch.distributed.launcher")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def bind_master_port(sock: socket.socket, host: str, port: int) -> None:
    """Bind the rendezvous port, or say clearly that something else holds it."""
    try:
        sock.bind((host, port))
    except OSError as error:
        raise ConfigError(
            f"--master-port {port} is already in use on this machine ({error.strerror}); "
            "choose another port, or omit --master-port to get a free one"
        ) from None


def check_port_free(port: int) -> None:
    """Node 0 hosts the rendezvous on this port: say so now if something else holds it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        bind_master_port(sock, "", port)


def check_nproc(nproc: int, device_kind: str) -> None:
    """Refuse impossible process counts before any process starts."""
    if device_kind == "cuda":
        import torch

        visible = torch.cuda.device_count()
        if nproc > visible:
            raise ConfigError(
                f"--nproc {nproc} needs {nproc} GPUs but {visible} are visible; "
                f"use --nproc {max(visible, 1)} or --device cpu"
            )


def torchrun_argv(spec: LaunchConfig, worker_argv: Sequence[str]) -> List[str]:
    """Arguments for torchrun: a static rendezvous on MASTER_ADDR:MASTER_PORT, or an elastic c10d one."""
    spec.validate()
    timeout = int(spec.rdzv_timeout)
    common = [f"--nproc-per-node={spec.nproc or 1}", f"--nnodes={spec.nnodes}", f"--max-restarts={spec.max_restarts}"]
    tail = ["--no-python", sys.executable, "-m", "ddptrain", *worker_argv]
    if spec.rdzv_endpoint:
        return [
            *common,
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={spec.rdzv_endpoint}",
            f"--rdzv-id={spec.rdzv_id}",
            f"--rdzv-conf=join_timeout={timeout}" + (f",{spec.rdzv_conf}" if spec.rdzv_conf else ""),
            *tail,
        ]
    addr = spec.master_addr or LOOPBACK  # IPv4 loopback: avoids IPv6 'Address family not supported'
    if spec.master_port and spec.node_rank == 0 and not spec.single_node:
        check_port_free(spec.master_port)
    port = spec.master_port or (free_port(addr) if spec.single_node else 29500)
    return [
        *common,
        f"--node-rank={spec.node_rank}",
        f"--master-addr={addr}",
        f"--master-port={port}",
        "--rdzv-backend=static",
        f"--rdzv-conf=timeout={timeout}",
        *tail,
    ]


def network_environment(spec: LaunchConfig) -> dict:
    """Socket interface settings for the workers: --iface everywhere it is given; loopback for a
    single-node job, so nothing it opens is reachable from the network."""
    if spec.iface:
        try:
            socket.if_nametoindex(spec.iface)
        except OSError:
            names = ", ".join(name for _, name in socket.if_nameindex())
            raise ConfigError(
                f"--iface {spec.iface}: no such network interface on this node (it has: {names})"
            ) from None
        return {"GLOO_SOCKET_IFNAME": spec.iface, "NCCL_SOCKET_IFNAME": spec.iface}
    if not spec.single_node:
        return {}
    try:
        socket.if_nametoindex("lo")
    except OSError:
        return {}
    # gloo and NCCL (its bootstrap and socket transport) on loopback; a user's own choice is kept.
    return {name: "lo" for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME") if name not in os.environ}


def parse_torchrun_argv(argv: Sequence[str]):
    """torchrun's own parser, given the launcher options only: argparse would otherwise read worker
    flags such as --nproc as ambiguous abbreviations of torchrun's options."""
    from torch.distributed import run as torchrun

    script_at = argv.index("--no-python") + 1
    args = torchrun.get_args_parser().parse_args(list(argv[: script_at + 1]))
    args.training_script_args = list(argv[script_at + 1 :])
    return args


class LoopbackRendezvous:
    """The single-node rendezvous store, listening on 127.0.0.1 only.

    torchrun's agent creates its TCPStore in multi-tenant mode, which reuses a server already
    running in this process on the same port; a server started here on a socket bound to loopback
    therefore keeps the job unreachable from the network (torchrun alone listens on every interface)."""

    def __init__(self, port: Optional[int]):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            bind_master_port(self.sock, LOOPBACK, port or 0)
        except ConfigError:
            self.sock.close()
            raise
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        self.store = self._start_store()

    def _start_store(self):
        from datetime import timedelta

        from torch.distributed import TCPStore

        try:
            store = TCPStore(
                LOOPBACK,
                self.port,
                1,
                True,
                timedelta(seconds=60),
                wait_for_workers=False,
                multi_tenant=True,
                master_listen_fd=self.sock.fileno(),
            )
        except (TypeError, RuntimeError):  # a torch without master_listen_fd: torchrun binds the port
            self.sock.close()
            log.warning(
                "this torch cannot serve the rendezvous store on a socket bound to 127.0.0.1: torchrun's store "
                "listens on every interface of this machine while the job runs (the store is unauthenticated; "
                "see docs/multinode.md, Trust model)"
            )
            return None
        self.sock.detach()  # the store's server owns the listening socket now
        return store

    def close(self) -> None:
        self.store = None
        self.sock.close()


def quiet_torchrun_logs() -> None:
    """torchrun's agent logs its own warnings ("Sending process N closing signal SIGTERM", "failed
    (exitcode: 1) ... of binary") on top of ddptrain's one-line explanation; keep them for --verbose.
    Its loggers set their level from LOGLEVEL when first created, so both are set."""
    os.environ.setdefault("LOGLEVEL", "CRITICAL")
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(TORCHRUN_LOGGERS):
            logging.getLogger(name).setLevel(logging.CRITICAL)


@dataclass(frozen=True)
class RunRecord:
    """What the launcher can learn about the run once its workers are gone (the run directory knows; runtime/ does
    not read it itself): whether there is a checkpoint to resume from, and the step at which the workers saved a
    checkpoint and stopped after a given time (None when they did not); and whether the command already resumes
    (--resume given: rerunning it continues, nothing to add)."""

    has_checkpoint: Callable[[], bool] = lambda: False
    stopped_at_step: Callable[[float], Optional[int]] = lambda since: None
    resuming: bool = False


@dataclass(frozen=True)
class Entrypoint:
    """Workers that run a Python function (`ddptrain.fit`) instead of `python -m ddptrain ARGV`: torchrun's agent
    starts them by `start_method` ("spawn", or "fork" where the caller's objects cannot be imported: a notebook)
    with `args` pickled to each."""

    function: Callable[..., Any]
    args: tuple
    start_method: str = "spawn"


def launch(
    spec: LaunchConfig,
    worker_argv: Sequence[str],
    verbose: bool = False,
    run: RunRecord = RunRecord(),
    entrypoint: Optional[Entrypoint] = None,
) -> int:
    """Run this node's workers to completion; return 0 on success, raise LaunchError naming the failed
    rank (Preempted when they stopped on SIGTERM/SIGUSR1/SIGINT after saving). With `entrypoint` the workers run
    that function, under the same rendezvous, environment and failure handling."""
    if not verbose:
        quiet_torchrun_logs()
    from torch.distributed import run as torchrun  # noqa: F401 (its loggers exist from here: quieted below)

    if not verbose:
        quiet_torchrun_logs()  # the loggers the imports above just created
    scratch = _scratch_folder()  # first: a temporary folder that cannot hold it stops the launch with nothing to undo
    caller_environment = dict(os.environ)
    local = None
    try:
        if spec.single_node:
            warn_single_node_address(spec.master_addr)
            local = LoopbackRendezvous(spec.master_port)
            spec = dataclasses.replace(spec, master_addr=LOOPBACK, master_port=local.port)
        argv = torchrun_argv(spec, worker_argv)
        _prepare_environment(spec)
        os.environ[LAUNCH_DIR_ENV] = scratch
        _run_node(spec, argv, scratch, run, entrypoint)
    finally:
        _forget_launch(scratch, caller_environment)
        if local is not None:
            local.close()
    return 0


def _run_node(
    spec: LaunchConfig, argv: List[str], scratch: str, run: RunRecord, entrypoint: Optional[Entrypoint]
) -> None:
    """torchrun's agent for this node's workers, its failures and the signals it was stopped by said as ddptrain's."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    previous_usr1 = signal.signal(signal.SIGUSR1, _forward_usr1)  # torchrun's agent handles SIGTERM itself
    started, interrupts = time.time(), _Interrupts().install()
    try:
        mark_launch()
        _run_workers([f"--log-dir={scratch}", *argv], entrypoint)
    except SignalException as stopped:
        raise _signal_outcome(signal.Signals(stopped.sigval), started, run, interrupts.killed) from None
    except ChildFailedError as failure:
        if all(info.exitcode == EXIT_PREEMPTED for info in failure.failures.values()):
            raise Preempted(
                "the workers saved a checkpoint and stopped on a signal; continue with --resume auto"
            ) from None
        raise LaunchError(_describe_failure(failure, not run.resuming and run.has_checkpoint())) from None
    except json.JSONDecodeError as error:  # torchrun found a worker's error report half-written
        raise LaunchError(
            f"a worker on node {spec.node_rank} failed and torchrun could not read its error report ({error}); "
            "the workers' own lines above, if any, say what failed"
        ) from None
    except (RuntimeError, OSError) as error:  # the agent itself: rendezvous, store, port
        hint = explain(str(error))
        if hint is None:
            raise
        raise LaunchError(f"the launcher failed on node {spec.node_rank}: {first_line(error)}\n  {hint}") from None
    finally:
        interrupts.uninstall()
        signal.signal(signal.SIGUSR1, previous_usr1)


def _prepare_environment(spec: LaunchConfig) -> None:
    """What the workers inherit from this process's environment (`_forget_launch` puts it back as it was)."""
    os.environ.update(network_environment(spec))
    if spec.rdzv_endpoint:
        # torchrun's c10d rendezvous shares one TCP store across rounds and keeps the bootstrap address it found in
        # the first; when a node joins and the old rank 0 stays rank 0, it never publishes that address in the new
        # round and the joiner waits for it until the store times out (torch 2.x, dynamic_rendezvous.py). Building
        # it again each round is torch's own opt-out; workers then host their store themselves (runtime/dist.py).
        os.environ.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    os.environ[WORKER_ENV] = "1"
    # An even share of the cores per process; torchrun would otherwise force 1 thread each.
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, available_cpus() // (spec.nproc or 1))))


def _forget_launch(scratch: str, caller_environment: Mapping[str, str]) -> None:
    """What a launch left in this process's environment (the workers' markers, OMP_NUM_THREADS, the socket
    interfaces) and the temporary folder, undone when it ends however it ends: a script or notebook that calls
    `ddptrain.fit` again, or starts other processes, finds its environment as it was."""
    for name in [name for name in os.environ if name not in caller_environment]:
        del os.environ[name]
    for name, value in caller_environment.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
    shutil.rmtree(scratch, ignore_errors=True)


def _scratch_folder() -> str:
    """This node's scratch folder for one launch: torchrun's agent keeps the workers' error files there (left to
    itself it makes a `torchelastic_*` folder in the temporary folder that nothing removes), the workers their claims
    to report (cli.py); `launch` removes it when the launch ends, after a failure has been read from it."""
    try:
        return tempfile.mkdtemp(prefix="ddptrain-launch-")
    except OSError as error:
        raise LaunchError(
            f"cannot make the launcher's scratch folder in the temporary folder {tempfile.gettempdir()}: "
            f"{error.strerror or error}; set TMPDIR to a folder this user can write"
        ) from None


def _run_workers(argv: Sequence[str], entrypoint: Optional[Entrypoint]) -> None:
    """torchrun's agent on `argv`: the workers run `python -m ddptrain ...`, or `entrypoint`'s function."""
    from torch.distributed import run as torchrun
    from torch.distributed.launcher.api import elastic_launch

    if entrypoint is None:
        torchrun.run(parse_torchrun_argv(argv))
        return
    config, _, _ = torchrun.config_from_args(parse_torchrun_argv(argv))
    config.start_method = entrypoint.start_method
    elastic_launch(config, entrypoint.function)(*entrypoint.args)


def warn_single_node_address(master_addr: Optional[str]) -> None:
    """A one-node job stays on loopback whatever --master-addr says: nothing outside this machine needs to reach it."""
    if master_addr and master_addr not in (LOOPBACK, "localhost", "::1"):
        log.warning(
            "--master-addr %s on a one-node job: the rendezvous store and gloo/NCCL listen on %s only, so nothing "
            "outside this machine can reach the job; give --nnodes N for a job across nodes",
            master_addr,
            LOOPBACK,
        )


class _Interrupts:
    """A second Ctrl-C ends the workers at once. torchrun's agent answers a signal by forwarding it to the workers and
    waiting for them (30 s); a second signal interrupts that wait, but the agent then waits again. So the handler the
    agent installs is wrapped: on the second SIGINT it first kills every process below the launcher."""

    def __init__(self) -> None:
        self.count = self.killed = 0
        self.module: Any = None

    def install(self) -> _Interrupts:
        try:
            from torch.distributed.elastic.multiprocessing import api
        except ImportError:
            return self
        original = getattr(api, "_terminate_process_handler", None)
        if original is None:
            return self

        def handler(signum, frame):
            if signum == signal.SIGINT:
                self.count += 1
                if self.count > 1:
                    self.killed += _kill_workers()
            original(signum, frame)

        self.module, self.original = api, original
        api._terminate_process_handler = handler  # registered by name when the agent starts its workers
        return self

    def uninstall(self) -> None:
        if self.module is not None:
            self.module._terminate_process_handler = self.original


def _signal_outcome(sig: signal.Signals, started: float, run: RunRecord, killed: int) -> DdptrainError:
    """What to say after the launcher was signalled: what the workers did, read from the run directory."""
    if killed:
        return Preempted(
            f"interrupted twice: {counted(killed, 'worker process')} killed at once, without a checkpoint; the last "
            "checkpoint saved before stays the resume point (--resume auto)",
            exit_code=EXIT_INTERRUPTED,
        )
    step = run.stopped_at_step(started)
    if step is not None:
        return Preempted(
            f"received {sig.name}: every process saved a checkpoint at step {step} and stopped; continue with "
            "--resume auto"
        )
    return Preempted(
        f"received {sig.name}: the workers stopped before saving a checkpoint (they had not reached a step where "
        "they could); the last checkpoint saved before, if any, stays the resume point (--resume auto)",
        exit_code=EXIT_INTERRUPTED if sig == signal.SIGINT else 128 + int(sig),
    )


def _kill_workers() -> int:
    """SIGKILL every process below this one (the workers torchrun started, in sessions of their own, and their
    loader workers); how many there were."""
    children: dict = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(found)


def _forward_usr1(signum, frame) -> None:
    """SIGUSR1 (SLURM's usual warning signal) takes the same path as SIGTERM: the agent sends it on
    to every worker and waits for them to finish."""
    from torch.distributed.elastic.multiprocessing.api import SignalException

    raise SignalException(f"process {os.getpid()} got SIGUSR1", sigval=signal.SIGUSR1)


def _describe_failure(failure, resumable: bool = False) -> str:
    lines, explanations = [], []
    for rank, info in sorted(failure.failures.items()):  # keyed by global rank
        lines.append(f"rank {rank} (local {info.local_rank}, pid {info.pid}) exited with code {info.exitcode}")
        hint = explain(_failure_text(info), info.exitcode)
        if hint and hint not in explanations:
            explanations.append(hint)
            lines[-1] += f" [{hint.split(':')[0]}]"
    text = (
        "worker processes failed: "
        + "; ".join(lines)
        + ". The failing rank's error is printed above; fix it and rerun"
        + (" (add --resume auto to continue from the last checkpoint)." if resumable else ".")
    )
    return text + "".join(f"\n  {hint}" for hint in explanations)


def _failure_text(info) -> str:
    """The worker's recorded error (torchrun's error file), as text."""
    message = getattr(info, "message", "")
    if isinstance(message, dict):
        message = message.get("message", "") or str(message)
    return str(message or "")
