"""`ddptrain bench memory`: what one training step holds per process under DDP, FSDP and FSDP with gradient
checkpointing, for one model, batch and image size, measured on real processes (torchrun's API, gloo on CPU,
NCCL on CUDA).

Per rank: the bytes of the parameters, gradients and optimizer state the process holds (its shards under FSDP), the
activations kept for the backward (tensors saved by autograd that are not parameters, counted once each), and the
peak — `torch.cuda.max_memory_allocated` on CUDA; on CPU the process's peak resident set (`ru_maxrss`) less what it
held before the model was built, with glibc's mmap threshold fixed (MALLOC_MMAP_THRESHOLD_) so that a freed tensor
leaves the resident set instead of staying in a grown heap. Then images/s over all ranks for a few steps after one warm-up step.

Run directly (`python -m ddptrain.tools.bench.memory --worker ...`) it is one variant's worker.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from typing import Any, Dict, List, Tuple

MB = 2**20
VARIANTS = {"ddp": ("ddp", False), "fsdp": ("fsdp", True), "fsdp+gc": ("fsdp", True)}


def run_memory_bench(
    model: str, img_size: int, batch_size: int, nproc: int, device: str, steps: int, variants: List[str]
) -> Tuple[Dict, List[Dict]]:
    """Each variant in its own torchrun job; the rows of the table, per rank the largest over ranks."""
    rows = []
    for variant in variants:
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
        found = _launch(variant, model, img_size, batch_size, nproc, device, steps)
        rows.append({"variant": variant, **found})
    result = {"model": model, "img_size": img_size, "batch_size": batch_size, "nproc": nproc, "device": device}
    return result, rows


def _launch(variant: str, model: str, img_size: int, batch: int, nproc: int, device: str, steps: int) -> Dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--standalone", "-m"]
    cmd += [__name__, "--worker", variant, "--model", model, "--img-size", str(img_size), "--batch-size", str(batch)]
    cmd += ["--device", device, "--steps", str(steps)]
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // nproc))}
    if device == "cpu":  # glibc then maps every tensor apart and returns it when freed: the resident set follows
        env.setdefault("MALLOC_MMAP_THRESHOLD_", "131072")  # what is alive, not what the heap once grew to
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": worker_failure(proc.stderr, proc.returncode), "log": "\n".join(proc.stderr.splitlines()[-40:])}
    ranks = [json.loads(line) for line in lines][-1]["ranks"]
    worst = {key: max(rank[key] for rank in ranks) for key in ranks[0] if key != "images/s"}
    return {**worst, "images/s": ranks[0]["images/s"]}


# a worker's uncaught exception as torchrun prints it: "[rank1]: ValueError: ..." (the traceback's last line)
_RANK_ERROR = re.compile(r"^\[(?:default)?rank(\d+)\]:\s+([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\w*\b.*)$")
# torchrun's failure table: "  rank      : 1 (local_rank: 1)" then "  exitcode  : -9 (pid: 123)"
_TABLE_ROW = re.compile(r"^\s+(rank|exitcode)\s*:\s*(-?\d+)")


def worker_failure(stderr: str, code: int) -> str:
    """What made a torchrun job fail, in one line: the last worker exception it printed (with its rank), else the
    exit code (or signal) torchrun's failure table gives for its first failed rank, else the job's exit code."""
    lines = stderr.splitlines()
    for line in reversed(lines):
        found = _RANK_ERROR.match(line)
        if found:
            return f"rank {found[1]}: {found[2].strip()}"
    table = [(row[1], int(row[2])) for row in map(_TABLE_ROW.match, lines) if row]
    ranks = [value for key, value in table if key == "rank"]
    exits = [value for key, value in table if key == "exitcode"]
    if exits:
        said = f"signal {-exits[-1]}" if exits[-1] < 0 else f"exit code {exits[-1]}"
        whose = f"rank {ranks[-1]}" if ranks else "a worker"
        return f"{whose} ended with {said} and printed no error{' (killed: out of memory?)' if exits[-1] == -9 else ''}"
    return f"exit {code}, no error printed"


# ---- the worker ------------------------------------------------------------------------------------
def _worker(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    from ...config.sections import ModelConfig
    from ...models import build_configured
    from ...models.fsdp import shard_model
    from ...models.gradckpt import enable_grad_checkpointing

    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    dtype = torch.bfloat16 if cuda else None
    before = _peak_bytes(device)
    torch.manual_seed(0)
    model = build_configured(ModelConfig(name=args.model), 1000, args.img_size).to(device)
    strategy = VARIANTS[args.worker][0]
    if args.worker.endswith("+gc"):
        enable_grad_checkpointing(model)
    if strategy == "fsdp":
        shard_model(model, device, dtype)
        trained = model
    else:
        from torch.nn.parallel import DistributedDataParallel

        trained = DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    images = torch.randn(args.batch_size, 3, args.img_size, args.img_size, device=device)
    labels = torch.randint(0, 1000, (args.batch_size,), device=device)
    figures = {"parameters MB": _bytes(model.parameters()) / MB}
    _forward(trained, images, labels, dtype).backward()  # the warm-up step
    figures["gradients MB"] = _bytes(p.grad for p in model.parameters() if p.grad is not None) / MB
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    figures["optimizer MB"] = _bytes(v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)) / MB
    saved = _SavedTensors()
    with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
        loss = _forward(trained, images, labels, dtype)  # a forward alone: what it keeps for the backward
    figures["activations MB"] = saved.total / MB
    del loss, saved
    figures["states MB"] = figures["parameters MB"] + figures["gradients MB"] + figures["optimizer MB"]
    _sync(device)
    start = time.perf_counter()
    for _ in range(args.steps):
        _forward(trained, images, labels, dtype).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    _sync(device)
    elapsed = time.perf_counter() - start
    figures["peak MB"] = (_peak_bytes(device) - (0 if cuda else before)) / MB
    figures["images/s"] = args.steps * args.batch_size * dist.get_world_size() / elapsed
    ranks: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, figures)
    if dist.get_rank() == 0:
        print(json.dumps({"variant": args.worker, "ranks": ranks}), flush=True)
    dist.destroy_process_group()


def _forward(model, images, labels, dtype):
    import torch
    import torch.nn.functional as F

    context = torch.autocast(images.device.type, dtype=dtype) if dtype is not None else _null()
    with context:
        return F.cross_entropy(model(images).float(), labels)


def _null():
    import contextlib

    return contextlib.nullcontext()


class _SavedTensors:
    """Bytes autograd keeps for the backward, parameters left out (the gathered ones are freed after each block
    under FSDP; the others are counted as parameters), each storage once."""

    def __init__(self):
        self.total, self.kept = 0, {}

    def pack(self, tensor):
        import torch

        if not isinstance(tensor, torch.nn.Parameter) and tensor.device.type != "meta":
            storage = tensor.untyped_storage()
            if storage._cdata not in self.kept:  # kept alive while counting: no address is reused and counted twice
                self.kept[storage._cdata] = storage
                self.total += storage.nbytes()
        return tensor

    @staticmethod
    def unpack(tensor):
        return tensor


def _bytes(tensors) -> int:
    total = 0
    for tensor in tensors:
        local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
        total += local.numel() * local.element_size()
    return total


def _peak_bytes(device) -> int:
    import torch

    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    parser = argparse.ArgumentParser(description="one variant of `ddptrain bench memory` (run under torchrun)")
    parser.add_argument("--worker", choices=list(VARIANTS), required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--img-size", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--steps", type=int, default=3)
    _worker(parser.parse_args())


if __name__ == "__main__":
    main()
