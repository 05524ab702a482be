"""Training benchmarks that run the real `ddptrain train` (and the bare loop in scripts/bare_ddp.py):
overhead, scaling and precision. Each figure is the mean steady-state training images/s (first steps
of each epoch left out, evaluation not counted) over all epochs but the first."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from ...util import flags

BARE_LOOP = Path(__file__).resolve().parent / "scripts" / "bare_ddp.py"  # shipped in the package


@dataclass
class Workload:
    data: Path
    model: str = "resnet18"
    img_size: int = 64
    batch_size: int = 32  # per process
    epochs: int = 3
    workers: int = 1
    device: str = "cpu"


def _mean_steady(records: List[Dict]) -> float:
    later = records[1:] or records
    return statistics.fmean(r["images_per_sec"] for r in later)


def run_ddptrain(
    work: Workload, out_dir: Path, nproc: int, batch_size: Optional[int] = None, extra: Sequence[str] = ()
) -> Dict:
    options = {
        "data": work.data,
        "out": out_dir,
        "val-split": 0,
        "model": work.model,
        "epochs": work.epochs,
        "batch-size": batch_size or work.batch_size,
        "img-size": work.img_size,
        "workers": work.workers,
        "optimizer": "sgd",
        "lr": 0.01,
        "device": work.device,
        "nproc": nproc,
    }
    cmd = [sys.executable, "-m", "ddptrain", "train", *flags(options), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    records = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    return {"images_per_sec": _mean_steady(records), "max_mem_mb": max(r.get("max_mem_mb", 0) for r in records)}


def run_bare(work: Workload, nproc: int) -> float:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={nproc}",
        "--standalone",
        str(BARE_LOOP),
        "--data",
        str(work.data),
        "--model",
        work.model,
        "--epochs",
        str(work.epochs),
        "--batch-size",
        str(work.batch_size),
        "--img-size",
        str(work.img_size),
        "--workers",
        str(work.workers),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"bare loop failed:\n{proc.stderr[-3000:]}")
    return _mean_steady([json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")])


def overhead(work: Workload, tmp: Path, nproc: int, rounds: int) -> tuple:
    bare, ours = [], []
    for index in range(rounds):  # alternate so drifting machine load hits both alike
        bare.append(run_bare(work, nproc))
        ours.append(run_ddptrain(work, tmp / f"overhead{index}", nproc)["images_per_sec"])
    rows = [
        {"loop": "bare DDP loop", "images/s": statistics.median(bare), "runs": ", ".join(f"{v:.1f}" for v in bare)},
        {"loop": "ddptrain", "images/s": statistics.median(ours), "runs": ", ".join(f"{v:.1f}" for v in ours)},
    ]
    return {"ratio": statistics.median(ours) / statistics.median(bare), "nproc": nproc}, rows


def scaling(work: Workload, tmp: Path, max_nproc: int, rounds: int) -> tuple:
    """Same global batch on 1..N processes: efficiency = images/s with N / images/s with 1."""
    global_batch = work.batch_size * max_nproc
    results: Dict[int, List[float]] = {n: [] for n in range(1, max_nproc + 1)}
    for index in range(rounds):
        for nproc in results:
            per_process = global_batch // nproc
            run = run_ddptrain(work, tmp / f"scaling{nproc}-{index}", nproc, batch_size=per_process)
            results[nproc].append(run["images_per_sec"])
    single = statistics.median(results[1])
    rows = [
        {
            "processes": n,
            "batch per process": global_batch // n,
            "images/s": statistics.median(v),
            "efficiency": statistics.median(v) / single,
            "runs": ", ".join(f"{x:.1f}" for x in v),
        }
        for n, v in results.items()
    ]
    return {"global_batch": global_batch, f"efficiency_{max_nproc}": rows[-1]["efficiency"]}, rows


def precision(work: Workload, tmp: Path, nproc: int, compile_too: bool) -> tuple:
    variants = [("fp32", ["--amp", "off"]), ("bf16", ["--amp", "bf16"])]
    if work.device == "cuda":
        variants.append(("fp16", ["--amp", "fp16"]))
    rows: List[Dict] = []
    for name, variant_flags in variants:
        for channels_last in (False, True):
            for compiled in (False, True) if compile_too else (False,):
                extra = [
                    *variant_flags,
                    *(["--channels-last"] if channels_last else []),
                    *(["--compile"] if compiled else []),
                ]
                label = name + (" +cl" if channels_last else "") + (" +compile" if compiled else "")
                try:
                    run = run_ddptrain(work, tmp / f"precision-{len(rows)}", nproc, extra=extra)
                    rows.append({"variant": label, "images/s": run["images_per_sec"], "peak MiB": run["max_mem_mb"]})
                except RuntimeError as error:
                    rows.append(
                        {
                            "variant": label,
                            "images/s": 0.0,
                            "peak MiB": 0.0,
                            "note": str(error).strip().splitlines()[-1][:120],
                        }
                    )
    base = rows[0]["images/s"] or 1.0
    for row in rows:
        row["speed-up"] = row["images/s"] / base
    return {"device": work.device}, rows
