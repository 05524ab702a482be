"""How many MCUs between two restart markers? Decode time of training crops' regions, of whole images, and bytes.

For each interval the JPEGs are rewritten as `ddptrain shard --restart-markers` would (with that largest interval)
and each image's RandomResizedCrop region is decoded by ddptrain's compiled decoder, at the scale the loader would
use; then the whole image. One thread, best of 3; microseconds per image.

    python benchmarks/restart_interval.py PHOTOS [--count 200] [--img-size 160 224] [--mcus 1 2 4 8]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Callable, Iterable, List

import torch

from ddptrain.data.crops import TrainCrop
from ddptrain.data.images import image_geometry, region_decoder
from ddptrain.data.restarts import with_restart_markers


def best_of(runs: int, work: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def each(results: Iterable) -> None:
    """Runs the decodes, dropping each result at once (as the loader does: no memory piles up)."""
    for _ in results:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("photos", help="a folder of JPEGs (searched recursively)")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--img-size", type=int, nargs="+", default=[160, 224])
    parser.add_argument("--mcus", type=int, nargs="+", default=[1, 2, 4, 8])
    args = parser.parse_args()
    decoder = region_decoder()
    if decoder is None:
        raise SystemExit("ddptrain was installed without its compiled decoder: nothing to measure")
    files = sorted(p for p in Path(args.photos).rglob("*") if p.suffix.lower() in (".jpg", ".jpeg"))[: args.count]
    originals = [p.read_bytes() for p in files]
    torch.set_num_threads(1)
    for size in args.img_size:
        torch.manual_seed(0)
        crop, boxes = TrainCrop(size), []
        for data in originals:
            box = crop.box(*image_geometry(data)[:2])
            boxes.append((box.reduction(size), *box.scaled(box.reduction(size))))
        for mcus in [0, *args.mcus]:
            datas: List[bytes] = [
                data if mcus == 0 else with_restart_markers(data, mcus=mcus) or data for data in originals
            ]
            sizes = [image_geometry(d)[:2] for d in datas]
            region = best_of(
                3, lambda datas=datas, boxes=boxes: each(decoder.decode(d, *b) for d, b in zip(datas, boxes))
            )
            whole = best_of(
                3,
                lambda datas=datas, sizes=sizes: each(
                    decoder.decode(d, 1, 0, 0, h, w) for d, (w, h) in zip(datas, sizes)
                ),
            )
            kib = sum(map(len, datas)) / len(datas) / 1024
            name = f"{mcus} MCUs" if mcus else "no markers"
            print(
                f"{size} px, {name}: region {1e6 * region / len(datas):.0f} us, whole {1e6 * whole / len(datas):.0f} "
                f"us, {kib:.1f} KiB"
            )


if __name__ == "__main__":
    main()
