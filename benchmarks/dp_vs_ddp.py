"""nn.DataParallel vs DistributedDataParallel on the GPUs of one machine: images/s and memory per GPU.

    python benchmarks/dp_vs_ddp.py [--model resnet50] [--batch-size 64] [--steps 30] [--out DIR] [--json]

Synthetic 224 px input, SGD, fp32; it needs at least 2 GPUs and says so otherwise. The global batch is the same for
both: DataParallel splits it inside one process; DDP gives each of N processes batch/N. This file is the only place
in the project where nn.DataParallel appears: it is here to be measured against, which is also why it is a script of
the repository and not a command of the installed package (`ddptrain bench` runs only what ships with ddptrain).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torchvision


def _train(model, batch: int, steps: int, device) -> float:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(batch, 3, 224, 224, device=device)
    labels = torch.randint(0, 1000, (batch,), device=device)
    for step in range(steps + 5):
        if step == 5:
            torch.cuda.synchronize()
            start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    torch.cuda.synchronize()
    return batch * steps / (time.perf_counter() - start)


def data_parallel(args) -> dict:
    model = torch.nn.DataParallel(torchvision.models.get_model(args.model).cuda())
    ips = _train(model, args.batch_size, args.steps, torch.device("cuda", 0))
    memory = [torch.cuda.max_memory_allocated(i) / 2**20 for i in range(torch.cuda.device_count())]
    return {"mode": "DataParallel", "images_per_sec": ips, "max_mem_mb_per_gpu": memory}


def ddp_worker(args) -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    device = torch.device("cuda", local_rank)
    model = torch.nn.parallel.DistributedDataParallel(
        torchvision.models.get_model(args.model).to(device), device_ids=[local_rank]
    )
    ips = _train(model, args.batch_size // world, args.steps, device) * world
    memory = [None] * world
    dist.all_gather_object(memory, torch.cuda.max_memory_allocated(device) / 2**20)
    if dist.get_rank() == 0:
        print(json.dumps({"mode": "DDP", "images_per_sec": ips, "max_mem_mb_per_gpu": memory}), flush=True)
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=128, help="global batch")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--ddp-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ddp_worker:
        ddp_worker(args)
        return 0
    gpus = torch.cuda.device_count()
    if gpus < 2:
        print(f"skipped: needs at least 2 GPUs ({gpus} visible)")
        return 0
    rows = [data_parallel(args)]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc-per-node={gpus}",
            "--standalone",
            __file__,
            "--ddp-worker",
            "--model",
            args.model,
            "--batch-size",
            str(args.batch_size),
            "--steps",
            str(args.steps),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    result = {"model": args.model, "global_batch": args.batch_size, "gpus": gpus, "rows": rows}
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, "dp-vs-ddp.json").write_text(json.dumps(result, indent=2))
    if args.json:
        print(json.dumps(result))
    else:
        print("| mode | images/s | peak MiB per GPU |\n|---|---|---|")
        for row in rows:
            memory = ", ".join(f"{m:.0f}" for m in row["max_mem_mb_per_gpu"])
            print(f"| {row['mode']} | {row['images_per_sec']:.0f} | {memory} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
