"""Errors a user can act on. The command line prints them as one line, with the rank, without a traceback.

An error carries the rank that raised it as an attribute (not as text in its message): the command
line adds "rank N:" when the job has several processes. An error that every rank raises in the same
way at the same point (`every_rank = True`, e.g. a data set too small for one step) is printed by each
node's local rank 0 only, so the user reads it once per node.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Tuple


class DdptrainError(Exception):
    """Base class: the message says what happened and what to do."""

    exit_code = 1
    every_rank = False  # raised identically on every rank: local rank 0 prints it for its node
    # Raised alike on several ranks but not necessarily on all (a data error met in loader workers): the first rank
    # of a node to report an error with this key prints it, the others of that node stay quiet.
    summary_key: Optional[str] = None

    def __init__(
        self,
        message: str,
        rank: Optional[int] = None,
        every_rank: Optional[bool] = None,
        exit_code: Optional[int] = None,
    ):
        super().__init__(message)
        self.rank = rank
        if every_rank is not None:
            self.every_rank = every_rank
        if exit_code is not None:
            self.exit_code = exit_code


class ConfigError(DdptrainError):
    exit_code = 2


class DataError(DdptrainError):
    pass


class WeightsError(DdptrainError):
    pass


class CheckpointError(DdptrainError):
    pass


class LaunchError(DdptrainError):
    pass


class NonFiniteLossError(DdptrainError):
    every_rank = True  # the loss is all-reduced first, so every rank sees the same value


class RanksDisagreeError(DdptrainError):
    every_rank = True  # every rank compares the same gathered facts


class PeerFailureError(DdptrainError):
    pass


# Errors raised in two places: before any process starts (ddptrain.checks) and in the worker that reads the file.
def missing_weights_file(path) -> WeightsError:
    return WeightsError(
        f"weights file {path} does not exist; refusing to train from scratch silently "
        "(drop --weights to start from random initialisation)"
    )


# Archives a dataset is downloaded as, and the command that unpacks each into the current folder.
_ARCHIVES: Tuple[Tuple[str, str, str], ...] = (
    *((".zip", "zip", "unzip {}"), (".tar.gz", "gzip tar", "tar xzf {}"), (".tgz", "gzip tar", "tar xzf {}")),
    *((".tar.xz", "xz tar", "tar xJf {}"), (".tar.bz2", "bzip2 tar", "tar xjf {}"), (".7z", "7-Zip", "7z x {}")),
)


# timm's --dataset names (READER/NAME): what ddptrain takes in their place
_HF_DATASET = "a Hugging Face dataset: --data hf:{name} once it is in the datasets cache, or a save_to_disk folder"
TIMM_READERS = {
    "torch": "a torchvision dataset: save it as class folders, or hand it to ddptrain.fit(data=...) in Python",
    "hfds": _HF_DATASET,
    "hfids": _HF_DATASET,
    "hf-hub": _HF_DATASET,
    "tfds": "a TensorFlow dataset: write its images as class folders or a path,label CSV and give that",
    "wds": "WebDataset shards: give --data their folder of .tar files (or wds:PATH)",
}
_TIMM_DATASET = re.compile(r"^(torch|hfds|hfids|tfds|wds)/([\w.-]+)$|^(hf-hub):([\w./-]+)$")


def missing_data_folder(root) -> DataError:
    path = Path(root)
    if not path.is_file():
        timm = _TIMM_DATASET.match(str(root)) if not path.exists() else None
        if timm:
            reader, name = (timm.group(1), timm.group(2)) if timm.group(1) else (timm.group(3), timm.group(4))
            return DataError(
                f"--data {root} is timm's name for {TIMM_READERS[reader].format(name=name)} (ddptrain "
                "fetches no dataset by name)"
            )
        return DataError(f"data folder {root} does not exist or is not a folder")
    archive = next((entry for entry in _ARCHIVES if path.name.lower().endswith(entry[0])), None)
    if archive is not None:
        return DataError(
            f"--data {root} is a {archive[1]} archive: unpack it ({archive[2].format(path.name)}) and give the folder "
            "it makes"
        )
    return DataError(
        f"--data {root} is a file, not a folder: give a folder of class folders, a CSV, JSON Lines or Parquet "
        f"manifest, a shard set or a .tar set{_list_file_hint(path)}"
    )


def _list_file_hint(path: Path) -> str:
    """For a file of `path label` lines (as mmpretrain and Caffe list images): how to make it a CSV manifest."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(4096).decode("utf-8", "replace").split()
    except OSError:
        return ""
    if len(first) != 2 or "." not in first[0]:
        return ""
    csv = path.with_suffix(".csv").name
    return (
        f"; its lines are 'path label' (as mmpretrain and Caffe list images): write them as a CSV manifest, e.g. "
        f"(echo path,label; sed 's/ \\([^ ]*\\)$/,\\1/' {path.name}) > {csv}, and give --data {csv}"
    )


def missing_tracker_package(tracker: str) -> ConfigError:
    """--log-to mlflow|wandb without the package: checked before any process starts, and again in rank 0."""
    return ConfigError(
        f"--log-to {tracker}: the {tracker} package is not installed; pip install 'ddptrain[{tracker}]' "
        "(or drop it from --log-to)"
    )
