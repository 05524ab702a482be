"""Listing time and peak memory of a large manifest: `python benchmarks/manifest_listing.py --rows 10000000`.

Writes a `path,label` Parquet manifest of N rows (and, with --csv-rows M, a CSV of M rows) into a scratch folder,
then lists and splits each in a fresh process (`ddptrain.load_data`, as `train` does before its first step) and
prints one JSON line per manifest: rows, seconds, peak resident memory of that process, and the split's sizes.
The image files are not created: listing reads the manifest only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import json, resource, sys, time
import ddptrain
started = time.perf_counter()
split = ddptrain.load_data(sys.argv[1], val_split=0.2, seed=0)
took = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": round(took, 2), "peak_rss_mb": round(peak), "train": len(split.train),
                  "val": len(split.val), "classes": len(split.classes),
                  "index_mb": round((split.train.nbytes + split.val.nbytes) / 2**20, 1)}))
"""


def write_parquet(path: Path, rows: int, classes: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    ids = pa.array(np.arange(rows, dtype=np.int64))
    label_ids = pa.array((np.arange(rows) % classes).astype(np.int64))
    labels = pc.binary_join_element_wise("n", pc.cast(label_ids, pa.string()), "")
    paths = pc.binary_join_element_wise(labels, pc.binary_join_element_wise("/img_", pc.cast(ids, pa.string()), ""), "")
    paths = pc.binary_join_element_wise(paths, ".jpg", "")
    pq.write_table(pa.table({"path": paths, "label": labels}), path, row_group_size=1_000_000)


def write_csv(path: Path, rows: int, classes: int) -> None:
    with open(path, "w") as handle:
        handle.write("path,label\n")
        for i in range(rows):
            handle.write(f"n{i % classes}/img_{i}.jpg,n{i % classes}\n")


def measure(manifest: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(manifest)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--csv-rows", type=int, default=1_000_000, help="0: no CSV for comparison")
    parser.add_argument("--classes", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        jobs = [("parquet", folder / "list.parquet", args.rows, write_parquet)]
        if args.csv_rows:
            jobs.append(("csv", folder / "list.csv", args.csv_rows, write_csv))
        for kind, path, rows, write in jobs:
            started = time.perf_counter()
            write(path, rows, args.classes)
            written = time.perf_counter() - started
            result = {"manifest": kind, "rows": rows, "file_mb": round(path.stat().st_size / 2**20, 1)}
            print(json.dumps({**result, "written_s": round(written, 1), **measure(path)}), flush=True)


if __name__ == "__main__":
    main()
