"""Where start-up time goes: from `ddptrain train` to this rank's first optimizer step, phase by phase.

The command records the moment it started (`DDPTRAIN_T0`, inherited by the workers it launches) and
the moment its launcher handed over to torchrun (`DDPTRAIN_LAUNCHED_AT`); each worker marks its own
phases on a `StartupClock` passed down explicitly. Rank 0 logs the breakdown once and, when
`DDPTRAIN_STARTUP_REPORT` names a file, writes it there as JSON (`ddptrain bench startup` reads it).
The standard library only.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

T0_ENV = "DDPTRAIN_T0"
LAUNCHED_ENV = "DDPTRAIN_LAUNCHED_AT"
REPORT_ENV = "DDPTRAIN_STARTUP_REPORT"


def mark_command_start(environ=os.environ) -> bool:
    """Called first thing by the command line; a launched worker keeps its launcher's start. Returns whether
    this call made the mark: the command that made it removes it when it ends (`forget_command_start`), so a
    program calling `ddptrain.cli.main` twice, or starting other programs afterwards, hands on no stale start."""
    if T0_ENV in environ:
        return False
    environ[T0_ENV] = repr(time.time())
    return True


def forget_command_start(environ=os.environ) -> None:
    """Undo `mark_command_start` (the launcher undoes its own mark)."""
    environ.pop(T0_ENV, None)


def mark_launch(environ=os.environ) -> None:
    """Called by the launcher just before torchrun starts the workers."""
    environ[LAUNCHED_ENV] = repr(time.time())


def _mark(environ: Mapping[str, str], name: str) -> Optional[float]:
    """A moment another process wrote into the environment. One that is not a number, or lies in the future (a
    value someone exported by hand), is not this command's: None, as if there were none, so the report never
    fails a run or shows negative phases."""
    try:
        at = float(environ[name])
    except (KeyError, ValueError):
        return None
    return at if math.isfinite(at) and at <= time.time() else None


class StartupClock:
    """Phase marks of one process, as seconds since the command started."""

    def __init__(self, environ: Mapping[str, str] = os.environ):
        now = time.time()
        t0 = _mark(environ, T0_ENV)
        self.t0 = now if t0 is None else t0
        self.marks: List[Tuple[str, float]] = []
        launched = _mark(environ, LAUNCHED_ENV)
        if launched is not None:
            self.marks.append(("launcher", max(launched, self.t0)))
            self.marks.append(("worker start", now))
        else:
            self.marks.append(("command start", now))
        self.reported = False

    def mark(self, phase: str) -> None:
        """The phase that just ended."""
        self.marks.append((phase, time.time()))

    def phases(self) -> Dict[str, float]:
        """Seconds spent in each phase, in order; they add up to `total_s`."""
        durations, previous = {}, self.t0
        for phase, at in self.marks:
            durations[phase] = max(0.0, at - previous)
            previous = at
        return durations

    @property
    def total_s(self) -> float:
        return self.marks[-1][1] - self.t0

    def summary(self) -> str:
        parts = ", ".join(f"{phase} {seconds:.2f}" for phase, seconds in self.phases().items())
        return f"start-up: first optimizer step {self.total_s:.2f} s after the command started ({parts})"

    def report_once(self, log, environ: Mapping[str, str] = os.environ) -> Optional[Dict]:
        """Log the breakdown (and write it where DDPTRAIN_STARTUP_REPORT says) the first time only."""
        if self.reported:
            return None
        self.reported = True
        result = {"total_s": self.total_s, "phases": self.phases()}
        log.info(self.summary())
        target = environ.get(REPORT_ENV)
        if target:
            Path(target).write_text(json.dumps(result) + "\n")
        return result
