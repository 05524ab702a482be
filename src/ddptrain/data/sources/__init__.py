"""Where --data can come from: one module per kind of source, asked in order which one a location is. Without
torch: the command line asks a source to `check` the data before any process starts.

A source knows how it is recognised (`recognises`), what can be checked quickly (`check`), how it lists and splits
its images into a `Split` whose parts are `Samples` (read by index, digested for the preflight), and every image of
it for `eval --split all` (`all_images`). Adding one: a module here with a class like these, its line in
`SOURCES` (before the catch-all folder), its tests, and its row in README's --data table.
"""

from __future__ import annotations

import dataclasses
from typing import List, Protocol, Sequence

__all__ = [
    "Reading",
    "Source",
    "SOURCES",
    "all_images",
    "check",
    "check_label_key",
    "reading_for",
    "load_split",
    "source_for",
]

from ...errors import DataError
from ..index import Samples
from ..split import Split
from .folder import FolderSource
from .hfdata import HFSource
from .jsonl import JsonLinesManifestSource
from .manifest import ManifestSource
from .parquet import ParquetManifestSource
from .pydataset import PyDatasetSource
from .reading import DEFAULT_LABEL_KEY, Reading
from .shardset import ShardSetSource
from .tarset import TarSetSource


class Source(Protocol):
    name: str

    def recognises(self, location: str) -> bool: ...

    def check(self, location: str, reading: Reading) -> None: ...

    def split(self, location: str, val_split: float, seed: int, reading: Reading) -> Split: ...

    def all_images(self, location: str, classes: Sequence[str], reading: Reading) -> Samples: ...


# the first that recognises it: a tar set before a shard set (both can be URLs), the folder last
SOURCES: List[Source] = [
    PyDatasetSource(),
    TarSetSource(),
    ShardSetSource(),
    HFSource(),
    ParquetManifestSource(),
    JsonLinesManifestSource(),
    ManifestSource(),
    FolderSource(),
]


def source_for(location: str) -> Source:
    for source in SOURCES:
        if source.recognises(location):
            return source
    raise DataError(f"--data {location}: not a kind of data ddptrain reads (README's --data table lists them)")


def check(location: str, reading: Reading = Reading()) -> None:
    """What can be known about --data quickly, before any process starts (in one line when it is wrong)."""
    _reading(location, reading).check(location, reading)


def load_split(location, val_split: float, seed: int, reading: Reading = Reading()) -> Split:
    """The classes and the train/validation samples of --data."""
    text = str(location)
    return _reading(text, reading).split(text, val_split, seed, reading)


def all_images(location, classes: Sequence[str], reading: Reading = Reading()) -> Samples:
    """Every image of --data, labelled by its position in `classes` (`eval --split all`)."""
    text = str(location)
    return _reading(text, reading).all_images(text, classes, reading)


def _reading(location: str, reading: Reading) -> Source:
    """The source of `location`, refused for --task multilabel when it gives one class per image."""
    source = source_for(location)
    if reading.multilabel and not getattr(source, "multilabel", False):
        raise DataError(
            f"--task multilabel: {location} is a {source.name}, which gives one class per image; give a CSV manifest "
            "whose label column lists each image's classes as a|b|c"
        )
    return source


def reading_for(location: str, reading: Reading, trained_on: str) -> Reading:
    """`reading` (a run's options) for other data than the run's: its --label-key where it means the same kind of
    thing there (a column, a member), the default where it does not (a tar set's `txt` member is no CSV's column)."""
    if reading.label_key == DEFAULT_LABEL_KEY:
        return reading
    means = getattr(source_for(location), "keyed_labels", None)
    if means is not None and means == getattr(source_for(trained_on), "keyed_labels", None):
        return reading
    return dataclasses.replace(reading, label_key=DEFAULT_LABEL_KEY)


def check_label_key(location: str, reading: Reading) -> None:
    """`train --label-key` given for data whose labels no key chooses (a folder, a shard set): refused, not ignored.
    Only for the options a user gives: `eval` reads a checkpoint's own --label-key for any data it is given."""
    source = source_for(location)
    if reading.label_key != DEFAULT_LABEL_KEY and not getattr(source, "keyed_labels", False):
        raise DataError(
            f"--label-key {reading.label_key}: {location} is a {source.name}, whose labels are not chosen by a key; "
            "it names a tar set's member, or a manifest's or Hugging Face dataset's column: drop it"
        )
