"""`ddptrain bench startup`: how long `ddptrain train` takes to reach its first optimizer step, by phase.

Runs a tiny training (a generated data set of a few dozen images, one epoch) `--rounds` times, as a user
would from a shell, and reads the breakdown rank 0 writes (DDPTRAIN_STARTUP_REPORT). The command's
start is taken just before it is spawned, so the interpreter's own start-up is counted too.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

from ...runtime.startup import REPORT_ENV, T0_ENV
from ...util import flags


def one_run(data: Path, out: Path, nproc: int, device: str, model: str, img_size: int) -> Dict:
    report = out.with_suffix(".startup.json")
    env = {**os.environ, REPORT_ENV: str(report), T0_ENV: repr(time.time())}
    env.pop("DDPTRAIN_WORKER", None)
    options = {
        "data": data,
        "out": out,
        "model": model,
        "img-size": img_size,
        "batch-size": 4,
        "epochs": 1,
        "workers": 1,
        "val-split": 0.25,
        "nproc": nproc,
        "device": device,
    }
    cmd = [sys.executable, "-m", "ddptrain", "train", *flags(options)]
    started = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0 or not report.is_file():
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(report.read_text())
    result["command_s"] = time.time() - started
    return result


def startup(
    data: Path, tmp: Path, nproc: int, rounds: int, device: str, model: str, img_size: int
) -> Tuple[Dict, List[Dict]]:
    runs = [one_run(data, tmp / f"run{r}", nproc, device, model, img_size) for r in range(rounds)]
    phases = list(runs[0]["phases"])
    rows = [
        {"phase": phase, "seconds": statistics.median(run["phases"].get(phase, 0.0) for run in runs)}
        for phase in phases
    ]
    total = statistics.median(run["total_s"] for run in runs)
    for row in rows:
        row["share"] = f"{row['seconds'] / total:.0%}"
    rows.append({"phase": "first optimizer step (total)", "seconds": total, "share": "100%"})
    result = {
        "nproc": nproc,
        "rounds": rounds,
        "first_step_s": total,
        "first_step_s_runs": [round(run["total_s"], 2) for run in runs],
        "whole_command_s": statistics.median(run["command_s"] for run in runs),
    }
    return result, rows
