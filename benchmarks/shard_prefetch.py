"""Images/s of ddptrain's training loader over one shard set kept three ways — a local folder, an HTTP server on
loopback that behaves like a real link (`--mbps` per connection, `--latency-ms` before each answer), and an
S3-compatible store (SeaweedFS `weed mini` on loopback, its downloads capped at `--mbps`) — each remote one with
and without `--prefetch-shards`. `python benchmarks/shard_prefetch.py --count 1200 --rounds 2`

Each pass is one epoch through `training_images` (sampler, workers, decode, crop) from a fresh shard cache, in
alternation across rounds; the best of the rounds is printed as one JSON line per row.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

from ddptrain.data.loaders import LoaderSettings, training_images
from ddptrain.data.remote import CACHE_ENV
from ddptrain.data.shards import write_shards
from ddptrain.data.sources import Reading, load_split
from ddptrain.data.transforms import Preprocess
from ddptrain.tools.bench.photos import write_photos


class Throttled(http.server.SimpleHTTPRequestHandler):
    mbps = 100.0
    latency_s = 0.02

    def copyfile(self, source, outputfile):
        block = 64 * 1024
        started = time.perf_counter()
        sent = 0
        while True:
            data = source.read(block)
            if not data:
                return
            outputfile.write(data)
            sent += len(data)
            ahead = sent / (self.mbps * 1e6) - (time.perf_counter() - started)
            if ahead > 0:
                time.sleep(ahead)

    def send_head(self):
        time.sleep(self.latency_s)
        return super().send_head()

    def log_message(self, *args):
        pass


def serve(folder: Path, mbps: float, latency_ms: float):
    handler = type("Handler", (Throttled,), {"mbps": mbps, "latency_s": latency_ms / 1000})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def start_store(folder: Path, shards: Path, mbps: float):
    """SeaweedFS on loopback holding the shard set at s3://bench/shards/, or None when its binary is missing."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    try:
        from tests.s3_server import S3Store
    except ImportError:
        return None
    import pytest

    try:
        store = S3Store(folder, extra=[f"-filer.downloadMaxMBps={int(mbps)}"])
    except pytest.skip.Exception:
        return None
    url = store.upload(shards, "bench", "shards")
    os.environ.update(store.env())
    return store, url


def one_pass(location: str, ahead: int, cache: Path, size: int, workers: int) -> float:
    os.environ[CACHE_ENV] = str(cache)
    split = load_split(location, 0.0, 0, Reading(prefetch_shards=ahead))
    settings = LoaderSettings(32, workers, pin_memory=False, normalize_in_workers=True)
    loader = training_images(split.train, Preprocess(img_size=size), 0.08, 0, 0, 1, settings)
    images = 0
    started = time.perf_counter()
    for batch in loader:
        images += len(batch)
    return images / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1200)
    parser.add_argument("--shard-size", type=int, default=8 * 2**20)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ahead", type=int, default=2)
    parser.add_argument("--mbps", type=float, default=100.0, help="MB/s per connection of the remote stores")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="the HTTP server's wait before each answer")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="ddptrain-prefetch-") as scratch:
        tmp = Path(scratch)
        folder = write_photos(tmp / "photos", args.count)
        shards = tmp / "shards"
        write_shards(load_split(folder, 0.0, 0), shards, args.shard_size, 0)
        server, url = serve(shards, args.mbps, args.latency_ms)
        store = start_store(tmp / "s3", shards, args.mbps)
        rows = [("shards, local", str(shards), 0), ("HTTP", url, 0), ("HTTP", url, args.ahead)]
        if store is not None:
            rows += [("S3", store[1], 0), ("S3", store[1], args.ahead)]
        best = dict.fromkeys(range(len(rows)), 0.0)
        try:
            for r in range(args.rounds):
                for i, (_, location, ahead) in enumerate(rows):
                    cache = tmp / f"cache-{r}-{i}"
                    best[i] = max(best[i], one_pass(location, ahead, cache, args.img_size, args.workers))
                    shutil.rmtree(cache, ignore_errors=True)
        finally:
            server.shutdown()
            if store is not None:
                store[0].close()
        total = sum(p.stat().st_size for p in shards.glob("train-*.tar"))
        shared = {"images": args.count, "shards": len(list(shards.glob("train-*.tar"))), "shard_mb": total / 2**20}
        for i, (name, _, ahead) in enumerate(rows):
            row = {"source": name, "prefetch_shards": ahead, "images_per_s": round(best[i], 1)}
            print(json.dumps({**row, **shared, "mbps": args.mbps, "latency_ms": args.latency_ms}), flush=True)


if __name__ == "__main__":
    main()
