"""Does doing less per image cost accuracy? The same recipe on a folder of real photos (train/ and val/ inside),
2 processes, with every variant over several seeds so that the spread between seeds says what noise is:

- `--decode cpu` (JPEGs decoded at 1/2, 1/4, 1/8 of their size where the random crop allows) against
  `--decode full` (every image decoded whole);
- with `--max-side N ...`: the same recipe on shard sets made with `ddptrain shard --max-side N` (images re-encoded
  once at that longest side), against the shard set made from the original files.

    python benchmarks/decode_accuracy.py --data PHOTOS --img-size 128 --seeds 0,1,2 --epochs 12
    python benchmarks/decode_accuracy.py --data PHOTOS --img-size 224 --max-side 256,384,512 --seeds 0,1

Prints one JSON line per run (with `--decode`, also the final weights evaluated with the other decoding), then a
table of mean and spread of the final and best validation top-1 per variant.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List


def _train(data: str, out: Path, seed: int, args: argparse.Namespace, extra: List[str]) -> Dict:
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", data, "--out", str(out), "--seed", str(seed)]
    cmd += ["--model", args.model, "--img-size", str(args.img_size), "--epochs", str(args.epochs)]
    cmd += ["--batch-size", str(args.batch_size), "--nproc", "2", "--workers", "1", "--lr", str(args.lr)]
    cmd += ["--optimizer", "adamw", "--weight-decay", "0.05", "--warmup-epochs", "1", *extra]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    epochs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if '"val_top1"' in line]
    tops = [e["val_top1"] for e in epochs if e.get("val_top1") is not None]
    result = {"final_top1": tops[-1], "best_top1": max(tops), "seconds": time.perf_counter() - started}
    if "--decode" in extra:  # the same weights evaluated with the other decoding: the evaluation's own share
        other = "full" if extra[extra.index("--decode") + 1] == "cpu" else "cpu"
        cmd = [sys.executable, "-m", "ddptrain", "eval", "--checkpoint", str(out / "checkpoints" / "last.pt")]
        cmd += ["--data", data, "--decode", other, "--nproc", "1"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        report = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")][-1]
        result[f"final_top1_evaluated_{other}"] = report["top1"]
    return result


def _sd(values: List[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def _shards(data: str, out: Path, max_side: int) -> str:
    cmd = [sys.executable, "-m", "ddptrain", "shard", "--data", data, "--out", str(out), "--val-split", "0"]
    if max_side:
        cmd += ["--max-side", str(max_side)]
    subprocess.run(cmd, check=True, capture_output=True)
    return str(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a folder of photos with train/ and val/ inside")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--max-side", default="", help="comma-separated longest sides: compare pre-sized shard sets")
    parser.add_argument("--model", default="timm:test_resnet")
    parser.add_argument("--img-size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.003)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    rows: Dict[str, List[Dict]] = {}
    with tempfile.TemporaryDirectory(prefix="ddptrain-accuracy-") as tmp:
        root = Path(tmp)
        if args.max_side:
            sides = [0, *(int(s) for s in args.max_side.split(","))]
            variants = {
                (f"max side {side}" if side else "original files"): (_shards(args.data, root / f"s{side}", side), [])
                for side in sides
            }
        else:
            variants = {
                "--decode cpu": (args.data, ["--decode", "cpu"]),
                "--decode full": (args.data, ["--decode", "full"]),
            }
        for seed in seeds:  # variants alternate within each seed: the machine's drift falls on all alike
            for name, (data, extra) in variants.items():
                result = _train(data, root / f"{name.replace(' ', '_')}-{seed}", seed, args, extra)
                rows.setdefault(name, []).append(result)
                print(json.dumps({"variant": name, "seed": seed, **result}), flush=True)
    print("\n| variant | final val top-1, mean ± sd | best val top-1, mean ± sd | per seed (final) | s/run |")
    print("|---|---|---|---|---|")
    for name, runs in rows.items():
        final = [r["final_top1"] for r in runs]
        best = [r["best_top1"] for r in runs]
        print(
            f"| {name} | {statistics.mean(final):.3f} ± {_sd(final):.3f} | {statistics.mean(best):.3f} ± {_sd(best):.3f} "
            f"| {' '.join(f'{v:.3f}' for v in final)} | {statistics.mean(r['seconds'] for r in runs):.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
