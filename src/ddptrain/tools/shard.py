"""`ddptrain shard`: any --data train reads but a shard set of ours (a folder, a CSV manifest, a tar set other tools
wrote) as WebDataset tar shards plus ddptrain's index."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Optional

from ..data import restarts
from ..data.presize import Presize
from ..data.shards import ARRAYS, INDEX, TIMM_INFO, parse_size, read_index, write_shards
from ..data.sources import Reading, load_split, source_for
from ..data.split import without_copies
from ..errors import ConfigError, DataError
from ..train.progress import CountProgress
from ..train.rundir import check_apart
from ..util import counted

log = logging.getLogger("ddptrain")


def make_shards(
    data: str,
    out: str,
    shard_size: str,
    val_split: float,
    seed: int,
    overwrite: bool,
    reading: Reading = Reading(),
    presize: Optional[Presize] = None,
    progress_every: float = 30.0,
    restart_markers: bool = False,
    jobs: int = 1,
) -> dict:
    """`progress_every`: a bar on a terminal, else a line of images written at least this often (seconds; 0: none).
    `restart_markers`: rewrite JPEGs losslessly so that a crop decodes only its part (data/restarts.py). `jobs`:
    processes for the re-encoding."""
    limit = _checked_size(shard_size)
    _check_reencoding(presize, restart_markers, jobs)
    if source_for(data).name == "shard set":
        raise ConfigError(f"--data {data} is already a shard set")
    folder = Path(out)
    check_apart("--out", folder, "--data", data)
    _clear_earlier_set(folder, overwrite)
    started = time.perf_counter()
    split = load_split(data, val_split, seed, reading)
    if not split.by_data:  # copies in a split the data gives are said by write_shards, which hashes every image
        split = without_copies(split)
    with CountProgress(len(split.train) + len(split.val), "shard", "images", progress_every) as bar:
        summary = write_shards(
            split,
            folder,
            limit,
            seed,
            bar,
            val_split=val_split,
            presize=presize,
            restart_markers=restart_markers,
            jobs=jobs,
        )
    _say_reencoded(summary, presize, restart_markers)
    _warn_copies(summary["val_copies_of_train"], split.root)
    log.info(
        "wrote %s (%s) and %s (%s) of %s to %s in %.1f s; "
        "train with --data %s, or serve the folder over HTTP(S) and use --data https://HOST/PATH/",
        counted(summary["train"]["shards"], "training shard"),
        counted(summary["train"]["samples"], "image"),
        counted(summary["val"]["shards"], "validation shard"),
        counted(summary["val"]["samples"], "image"),
        counted(len(split.classes), "class"),
        folder,
        time.perf_counter() - started,
        folder,
    )
    return summary


def _checked_size(shard_size: str) -> int:
    try:
        limit = parse_size(shard_size)
    except ValueError as error:
        raise ConfigError(f"--shard-size: {error}") from None
    if limit < 1:
        raise ConfigError("--shard-size must be at least 1 byte")
    return limit


def _check_reencoding(presize: Optional[Presize], restart_markers: bool, jobs: int) -> None:
    if presize is not None and not (presize.max_side >= 8 and 1 <= presize.quality <= 100):
        raise ConfigError("--max-side must be at least 8 pixels and --quality in 1..100")
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: give at least 1 process")
    if restart_markers:
        restarts.require()


def _say_reencoded(summary: dict, presize: Optional[Presize], restart_markers: bool) -> None:
    if presize is not None:
        log.info(
            "re-encoded %s longer than %d px a side as JPEG quality %d (the others are stored as they were)",
            counted(summary["resized"], "image"),
            presize.max_side,
            presize.quality,
        )
    if restart_markers:
        left = summary["train"]["samples"] + summary["val"]["samples"] - summary["restart_marked"]
        log.info(
            "rewrote %s with restart markers (the same pixels)%s",
            counted(summary["restart_marked"], "JPEG"),
            f"; {counted(left, 'image')} that {'is' if left == 1 else 'are'} not a colour or grayscale JPEG, or "
            "could not be read, stored as before"
            if left
            else "",
        )


def _warn_copies(copies, root) -> None:
    """Validation images that are byte-for-byte training images: said, with the first three pairs."""
    if not copies:
        return
    shown = "; ".join(f"{val} = {train}" for val, train in copies[:3]) + (" ..." if len(copies) > 3 else "")
    log.warning(
        "%s of the validation part %s byte-for-byte a training image (%s, in %s): validation scores %s as unseen; "
        "remove one copy of each and shard again",
        counted(len(copies), "image"),
        "is" if len(copies) == 1 else "are",
        shown,
        root,
        "it" if len(copies) == 1 else "them",
    )


def _clear_earlier_set(folder: Path, overwrite: bool) -> None:
    """--overwrite removes an earlier shard set ddptrain wrote in `folder` — the files its shards.json lists — and
    nothing else; tar files that no shards.json of ours lists are never touched."""
    tars = sorted(folder.glob("train-*.tar")) + sorted(folder.glob("val-*.tar")) if folder.is_dir() else []
    index_file = folder / INDEX
    if not tars and not index_file.exists():
        return
    if not overwrite:
        raise ConfigError(f"{folder} already holds shards; use another --out, or --overwrite to replace them")
    try:
        index, _ = read_index(str(folder))
    except DataError as error:
        raise ConfigError(
            f"--overwrite: {folder} holds tar files but no readable ddptrain shard index ({error}); ddptrain removes "
            "only shard sets it wrote: delete them yourself, or use another --out"
        ) from None
    listed = [folder / entry["url"] for part in ("train", "val") for entry in index[part]["shardlist"]]
    for stale in [*listed, folder / INDEX, folder / ARRAYS, folder / TIMM_INFO]:
        stale.unlink(missing_ok=True)
    others = sorted(set(tars) - set(listed))
    if others:
        log.warning(
            "--overwrite: left %s the old index did not list: %s", counted(len(others), "tar file"), others[0].name
        )
