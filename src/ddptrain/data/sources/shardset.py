"""A shard set made by `ddptrain shard` as a source of data (`--data SHARDS/` or its `http(s)://` URL): its split is
fixed when the shards are written, so a run never splits it again (see ddptrain.data.shards)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ...errors import DataError
from ..shards import is_remote, is_shard_set, open_shard_set, read_index
from ..split import Split
from .reading import Reading


class ShardSetSource:
    name = "shard set"

    def recognises(self, location: str) -> bool:
        return is_shard_set(location)

    def check(self, location: str, reading: Reading) -> None:
        read_index(location, reading.fetch_timeout_s)  # the index reads, within its caps, and is consistent

    def split(self, location: str, val_split: float, seed: int, reading: Reading) -> Split:
        classes, train, val, index = open_shard_set(location, deadline_s=reading.fetch_timeout_s)
        train.prefetch_shards = reading.prefetch_shards
        where = location if is_remote(location) else Path(location).resolve()
        made_with = {key: index[key] for key in ("seed", "val_split", "presized") if index.get(key) is not None}
        return Split(classes, train, val, "shards", where, made_with, fixed=True)

    def all_images(self, location: str, classes: Sequence[str], reading: Reading):
        raise DataError(
            f"{location} is a shard set: its images are split into train and val parts for good; evaluate its val "
            "part with --split val"
        )
