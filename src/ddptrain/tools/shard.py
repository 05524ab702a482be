"""`ddptrain shard`: a data folder or CSV manifest as WebDataset tar shards plus ddptrain's index."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from tqdm import tqdm

from ..data.folder import load_split
from ..data.shards import ARRAYS, INDEX, TIMM_INFO, is_shard_set, parse_size, write_shards
from ..errors import ConfigError

log = logging.getLogger("ddptrain")


def make_shards(data: str, out: str, shard_size: str, val_split: float, seed: int, overwrite: bool) -> dict:
    try:
        limit = parse_size(shard_size)
    except ValueError as error:
        raise ConfigError(f"--shard-size: {error}") from None
    if limit < 1:
        raise ConfigError("--shard-size must be at least 1 byte")
    if is_shard_set(data):
        raise ConfigError(f"--data {data} is already a shard set")
    folder = Path(out)
    existing = sorted(folder.glob("train-*.tar")) + sorted(folder.glob("val-*.tar")) if folder.is_dir() else []
    if (existing or (folder / INDEX).exists()) and not overwrite:
        raise ConfigError(f"{folder} already holds shards; use another --out, or --overwrite to replace them")
    for stale in [*existing, folder / INDEX, folder / ARRAYS, folder / TIMM_INFO]:
        stale.unlink(missing_ok=True)
    started = time.perf_counter()
    split = load_split(data, val_split, seed)
    with tqdm(total=len(split.train) + len(split.val), unit="img", desc="shard", leave=False) as bar:
        summary = write_shards(split, folder, limit, seed, bar)
    log.info(
        "wrote %d training shard(s) (%d images) and %d validation shard(s) (%d images) of %d classes to %s in %.1f s; "
        "train with --data %s, or serve the folder over HTTP(S) and use --data https://HOST/PATH/",
        summary["train"]["shards"],
        summary["train"]["samples"],
        summary["val"]["shards"],
        summary["val"]["samples"],
        len(split.classes),
        folder,
        time.perf_counter() - started,
        folder,
    )
    return summary
