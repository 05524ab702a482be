"""`ddptrain bench input --shards`: the training input pipeline over the same images stored three ways — a folder
of files, a local shard set, and that shard set served over HTTP on loopback (downloaded into a fresh cache
during the pass) — one epoch each through ddptrain's own training loader (sampler, workers, decode, crop).

`--cold` drops the page cache before each pass (root only), so files and shards come from the disk as they
would the first time on a node, instead of from memory.
"""

from __future__ import annotations

import http.server
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

import torch

from ...data.images import ImageLimits
from ...data.loaders import LoaderSettings, training_images
from ...data.remote import CACHE_ENV
from ...data.samplers import EpochSampler
from ...data.shards import write_shards
from ...data.sources import load_split
from ...data.transforms import Preprocess
from .photos import write_photos

BATCH = 32


def _drop_page_cache() -> None:
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError as error:
        raise RuntimeError(f"--cold needs root to drop the page cache ({error})") from None


def _one_pass(location: str, size: int, workers: int, cold: bool) -> float:
    split = load_split(location, 0.0, 0)
    settings = LoaderSettings(BATCH, workers, pin_memory=False, normalize_in_workers=True)
    loader = training_images(split.train, Preprocess(img_size=size), 0.08, 0, 0, 1, settings)
    if cold:
        _drop_page_cache()
    images = 0
    start = time.perf_counter()
    for batch in loader:
        images += len(batch)
    return images / (time.perf_counter() - start)


def _read_pass(location: str, cold: bool) -> float:
    """Images/s reading the encoded bytes alone, in one epoch's training order (storage, not decoding)."""
    split = load_split(location, 0.0, 0)
    sampler = EpochSampler(len(split.train), 0, 1, 0, shard_sizes=getattr(split.train, "shard_sizes", None))
    if cold:
        _drop_page_cache()
    start = time.perf_counter()
    for index, _, _ in sampler:
        split.train.read(index, ImageLimits())
    return len(sampler) / (time.perf_counter() - start)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def run_shard_bench(
    data: Optional[str], count: int, size: int, rounds: int, workers: int, shard_size: int, cold: bool
) -> Dict:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="ddptrain-bench-") as tmp:
        folder = Path(data) if data else write_photos(Path(tmp) / "photos", count)
        shards = Path(tmp) / "shards"
        split = load_split(folder, 0.0, 0)
        write_shards(split, shards, shard_size, 0)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: _Quiet(*a, directory=str(shards)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        rows: List[Dict] = []
        try:
            for name, location in (
                ("folder of files", str(folder)),
                ("shards, local", str(shards)),
                ("shards, HTTP", url),
            ):
                best = read = 0.0
                for r in range(rounds):
                    os.environ[CACHE_ENV] = str(Path(tmp) / f"cache-{name[-4:]}-{r}")  # a cold shard cache
                    best = max(best, _one_pass(location, size, workers, cold))
                    os.environ[CACHE_ENV] = str(Path(tmp) / f"cache-{name[-4:]}-{r}-read")
                    read = max(read, _read_pass(location, cold))
                rows.append({"source": name, "images/s": round(best, 1), "read only, images/s": round(read, 1)})
        finally:
            server.shutdown()
            os.environ.pop(CACHE_ENV, None)
        total = sum(p.stat().st_size for p in shards.glob("*.tar"))
    return {
        "images": len(split.train),
        "shard_bytes": total,
        "shard_size": shard_size,
        "img_size": size,
        "workers": workers,
        "rounds": rounds,
        "cold_page_cache": cold,
        "source": data or "generated 500x375 JPEGs, quality 90",
        "rows": rows,
    }
