"""Preemption: SIGTERM, SIGUSR1 or SIGINT (Ctrl-C) asks a run to stop cleanly, keeping everything done so far.

Clusters announce the end of a job with a signal: Kubernetes sends SIGTERM to the container before
killing it; SLURM sends the signal chosen with `sbatch --signal` (often USR1) ahead of the time limit
or a preemption. The launcher (torchrun's agent) forwards the signal to every worker. A worker only
records it; the ranks agree at the next loss reduction (every --log-every steps, every mid-epoch
checkpoint step and each epoch's end), rank 0 writes a checkpoint, and every process exits with
EXIT_PREEMPTED so schedulers and scripts can tell "stopped to be resumed" from a failure.

Ctrl-C is the same request from a person: the first one stops every rank at the next agreement point with a
checkpoint; a second one aborts at once (the launcher kills its workers), saving nothing more.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any, Dict, Optional

from ..errors import DdptrainError

EXIT_PREEMPTED = 75  # EX_TEMPFAIL: a temporary condition; run the same command with --resume auto
SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
EXIT_INTERRUPTED = 128 + signal.SIGINT


class Preempted(DdptrainError):
    """The run stopped on request after saving a checkpoint; `--resume auto` continues it."""

    exit_code = EXIT_PREEMPTED


class StopRequest:
    """Records SIGTERM/SIGUSR1 instead of dying; `requested()` is polled at agreement points.

    A rank that has been inside one step for longer than `stuck_after_s` (--dist-timeout) cannot stop
    cleanly any more: its peers have given up on it. Such a rank exits at once on the signal instead
    of making the launcher wait for its grace period."""

    def __init__(self, stuck_after_s: Optional[float] = None) -> None:
        self.signum: Optional[int] = None
        self.stuck_after_s = stuck_after_s
        self.step_started_at: Optional[float] = None
        self._previous: Dict[int, Any] = {}

    def install(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def uninstall(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def step_started(self) -> None:
        self.step_started_at = time.monotonic()

    def step_finished(self) -> None:
        self.step_started_at = None

    def _handle(self, signum: int, frame) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            sys.stderr.write("ddptrain: interrupted again; stopping at once without a checkpoint\n")
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)
        if self.signum is None:
            self.signum = signum
            if signum == signal.SIGINT and os.environ.get("RANK", "0") == "0":
                sys.stderr.write(
                    "ddptrain: interrupted; every process saves a checkpoint at its next step and stops "
                    "(Ctrl-C again to stop at once without one)\n"
                )
                sys.stderr.flush()
        if self.step_started_at is not None and self.stuck_after_s is not None:
            in_step = time.monotonic() - self.step_started_at
            if in_step > self.stuck_after_s:
                sys.stderr.write(
                    f"ddptrain: stuck in one step for {in_step:.0f} s (over --dist-timeout "
                    f"{self.stuck_after_s:g} s); exiting on {signal.Signals(signum).name} without "
                    "a checkpoint\n"
                )
                sys.stderr.flush()
                os._exit(128 + signum)

    def requested(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else "a peer's stop request"


def ignore_stop_signals() -> None:
    """For DataLoader worker processes: the launcher signals a worker's whole process group, and a
    loader worker that died of it would fail the step its rank is finishing."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
