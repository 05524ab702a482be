"""`ddptrain bench startup --files N`: time to the first step and the memory of every process (ranks and their
DataLoader workers) on a folder of N tiny files in 1,000 classes — what an ImageNet-sized folder costs before
any image is learned from.

Memory is read from /proc/PID/smaps_rollup: PSS (shared pages divided among the processes sharing them) and
USS (pages private to the process — what a forked worker has copied from its rank). It is sampled when the
first step is done and again `settle` seconds later, while training goes on: a worker that copies the file
list as it reads samples shows it in the second sample. The run is then stopped.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from ...runtime.startup import REPORT_ENV, T0_ENV
from ...util import flags

MARKER = ".ddptrain-bench-files"


def tiny_folder(folder: Path, files: int, classes: int = 1000) -> Path:
    """`files` 8x8 JPEGs (one small file per image: the file system's work is what is measured) in `classes`
    class folders; kept and reused when the folder already has them."""
    marker = folder / MARKER
    if marker.is_file() and marker.read_text().strip() == f"{files} {classes} numbered":
        return folder
    from PIL import Image

    images = []
    for c in range(classes):
        buffer = io.BytesIO()
        Image.new("RGB", (8, 8), ((c * 37) % 256, (c * 91) % 256, (c * 53) % 256)).save(buffer, "JPEG")
        images.append(buffer.getvalue())
    for c in range(classes):
        (folder / f"c{c:04d}").mkdir(parents=True, exist_ok=True)
    for i in range(files):
        c = i % classes
        # a JPEG comment with the image's number: no two files are copies (a split moves copies to training)
        comment = f"ddptrain bench image {i:09d}".encode()
        numbered = images[c][:2] + b"\xff\xfe" + (len(comment) + 2).to_bytes(2, "big") + comment + images[c][2:]
        (folder / f"c{c:04d}" / f"img{i:07d}.jpg").write_bytes(numbered)
    marker.write_text(f"{files} {classes} numbered\n")
    return folder


def classes_for(files: int) -> int:
    """1000 classes (ImageNet's), fewer for a small folder: at least 4 images per class."""
    return max(2, min(1000, files // 4))


def _children() -> Dict[int, List[int]]:
    tree: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(parent, []).append(int(entry))
    return tree


def _memory(pid: int) -> Optional[Dict[str, float]]:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    values = {}
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(":")
        values[name.strip()] = int(rest.split()[0]) / 1024  # kB -> MB
    return {
        "rss_mb": values.get("Rss", 0.0),
        "pss_mb": values.get("Pss", 0.0),
        "uss_mb": values.get("Private_Clean", 0.0) + values.get("Private_Dirty", 0.0),
    }


def process_memory(root: int) -> Dict[str, List[Dict[str, float]]]:
    """Memory of the launcher's rank processes and of their DataLoader workers (children of a rank)."""
    tree = _children()
    ranks = [pid for pid in tree.get(root, []) if _memory(pid)]
    found: Dict[str, List[Dict[str, float]]] = {"rank": [], "worker": []}
    for rank in ranks:
        found["rank"].append(_memory(rank) or {})
        for worker in tree.get(rank, []):
            sample = _memory(worker)
            if sample:
                found["worker"].append(sample)
    return found


def _ranks_level(root: int, wait_s: float = 5.0) -> None:
    """Wait (up to `wait_s`) until every rank has as many DataLoader workers as the others: rank 0 writes the report
    at its first step, and another rank may be a moment behind, its workers not all forked yet."""
    deadline = time.time() + wait_s
    while time.time() < deadline:
        tree = _children()
        counts = {len(tree.get(rank, [])) for rank in tree.get(root, [])}
        if len(counts) == 1:
            return
        time.sleep(0.05)


def _summary(samples: List[Dict[str, float]]) -> Dict[str, float]:
    if not samples:
        return {}
    return {f"max_{key}": round(max(s[key] for s in samples), 1) for key in samples[0]} | {"count": len(samples)}


def measure(data: Path, out: Path, nproc: int, workers: int, settle_s: float, checkout: Optional[Path]) -> Dict:
    report = out.with_suffix(".startup.json")
    env = {**os.environ, REPORT_ENV: str(report), T0_ENV: repr(time.time()), "OMP_NUM_THREADS": "1"}
    env.pop("DDPTRAIN_WORKER", None)
    if checkout is not None:  # another source tree of ddptrain (e.g. an older commit), same interpreter
        env["PYTHONPATH"] = str(checkout / "src")
    options = {
        "data": data,
        "out": out,
        "model": "timm:test_resnet",
        "img-size": 16,
        "batch-size": 16,
        "epochs": 1,
        "workers": workers,
        "val-split": 0.01,
        "nproc": nproc,
        "device": "cpu",
    }
    cmd = [sys.executable, "-m", "ddptrain", "train", *flags(options)]
    started = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        while not report.is_file():
            if proc.poll() is not None:
                raise RuntimeError(f"{' '.join(cmd)} failed:\n{(proc.stderr.read() if proc.stderr else '')[-3000:]}")
            time.sleep(0.05)
        _ranks_level(proc.pid)
        at_first_step = process_memory(proc.pid)
        time.sleep(settle_s)
        later = process_memory(proc.pid)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    startup = json.loads(report.read_text())
    return {
        "first_step_s": round(startup["total_s"], 2),
        "phases": {k: round(v, 2) for k, v in startup["phases"].items()},
        "memory_at_first_step": {kind: _summary(s) for kind, s in at_first_step.items()},
        f"memory_after_{settle_s:g}s": {kind: _summary(s) for kind, s in later.items()},
        "command_s": round(time.time() - started, 1),
    }


def scale(files: List[int], cache: Path, tmp: Path, nproc: int, workers: int, settle_s: float, checkout) -> Dict:
    results = {}
    for n in files:
        data = tiny_folder(cache / f"files-{n}", n, classes_for(n))
        results[str(n)] = measure(data, tmp / f"run-{n}", nproc, workers, settle_s, checkout)
        print(f"{n} files: {json.dumps(results[str(n)])}", file=sys.stderr, flush=True)
    return results


def rows(results: Dict, settle_s: float) -> List[Dict]:
    table = []
    for n, r in results.items():
        first, later = r["memory_at_first_step"], r[f"memory_after_{settle_s:g}s"]
        table.append(
            {
                "files": int(n),
                "first step s": r["first_step_s"],
                "data s": r["phases"].get("data", 0.0),
                "rank PSS MB": first["rank"].get("max_pss_mb"),
                "worker PSS MB": first["worker"].get("max_pss_mb"),
                f"worker USS MB (+{settle_s:g} s)": later["worker"].get("max_uss_mb"),
                f"rank USS MB (+{settle_s:g} s)": later["rank"].get("max_uss_mb"),
            }
        )
    return table


def worker_copy(n: int) -> Dict[str, float]:
    """MB a forked process (a DataLoader worker) comes to own after reading every entry of an n-image file list
    (ImageNet-like paths, 1000 classes), when the list is Python (path, label) tuples vs a SampleIndex."""
    from ...data.index import SampleIndex

    root = "/datasets/imagenet/train"
    pairs = [(f"{root}/n{i % 1000:08d}/n{i % 1000:08d}_{i}.JPEG", i % 1000) for i in range(n)]
    found = {}
    for kind, samples in (("tuples", pairs), ("arrays", SampleIndex.from_pairs(root, pairs))):
        ready, done = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker: reads each entry once, as one epoch does
            for i in range(len(samples)):
                samples[i]
            os.write(done, b"x")
            time.sleep(60)
            os._exit(0)
        os.read(ready, 1)
        found[f"{kind}_worker_uss_mb"] = round((_memory(pid) or {}).get("uss_mb", 0.0), 1)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(ready)
        os.close(done)
    return found
