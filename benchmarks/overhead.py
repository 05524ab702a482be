"""ddptrain vs the bare hand-written DDP loop on identical work, run alternately.

    .venv/bin/python benchmarks/overhead.py [--data DIR] [--nproc 2] [--rounds 2]

Both train the same torchvision model with SGD on the same images, per-process batch, image size,
transforms and loader workers, under torchrun with the same number of processes. Each reports
steady-state training images/s summed over ranks (first steps of every epoch excluded, evaluation
not counted); the mean over all epochs but the first is compared. Prints a markdown table and the ratio.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_bare(args, data: Path) -> float:
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={args.nproc}", "--standalone",
           str(HERE / "bare_ddp.py"), "--data", str(data), "--model", args.model, "--epochs", str(args.epochs),
           "--batch-size", str(args.batch_size), "--img-size", str(args.img_size), "--workers", str(args.workers)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    epochs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return statistics.mean(e["images_per_sec"] for e in epochs[1:] or epochs)


def run_ddptrain(args, data: Path, out_dir: Path) -> float:
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", str(data), "--out", str(out_dir),
           "--val-split", "0", "--model", args.model, "--epochs", str(args.epochs), "--batch-size",
           str(args.batch_size), "--img-size", str(args.img_size), "--workers", str(args.workers),
           "--optimizer", "sgd", "--lr", "0.01", "--nproc", str(args.nproc)]
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    epochs = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    return statistics.mean(e["images_per_sec"] for e in epochs[1:] or epochs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="class-folder dataset (default: generate one)")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--per-class", type=int, default=128, help="generated images per class (5 classes)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(args.data) if args.data else _generate(Path(tmp) / "data", args.per_class)
        bare, ours = [], []
        for round_index in range(args.rounds):  # alternate so drifting machine load hits both alike
            bare.append(run_bare(args, data))
            ours.append(run_ddptrain(args, data, Path(tmp) / f"run{round_index}"))
    result = {"bare_images_per_sec": statistics.median(bare), "ddptrain_images_per_sec": statistics.median(ours),
              "bare_runs": bare, "ddptrain_runs": ours, "nproc": args.nproc, "model": args.model,
              "img_size": args.img_size, "batch_size": args.batch_size}
    result["ratio"] = result["ddptrain_images_per_sec"] / result["bare_images_per_sec"]
    if args.json:
        print(json.dumps(result))
    else:
        print("| loop | images/s (median) | runs |\n|---|---|---|")
        print(f"| bare DDP loop | {result['bare_images_per_sec']:.1f} | {', '.join(f'{v:.1f}' for v in bare)} |")
        print(f"| ddptrain | {result['ddptrain_images_per_sec']:.1f} | {', '.join(f'{v:.1f}' for v in ours)} |")
        print(f"\nratio ddptrain / bare = {result['ratio']:.3f} ({args.nproc} processes, {args.model}, "
              f"{args.img_size}px, batch {args.batch_size} per process)")
    return 0


def _generate(folder: Path, per_class: int) -> Path:
    from ddptrain.data.synthetic import make_dataset

    return make_dataset(folder, classes=5, per_class=per_class, seed=0, progress=False)


if __name__ == "__main__":
    sys.exit(main())
