"""How a source reads its data, from the options of `--data`'s section: the same for every source, each using
what applies to it."""

from __future__ import annotations

from dataclasses import dataclass

from ..remote import DEFAULT_DEADLINE_S

DEFAULT_LABEL_KEY = "cls"  # --label-key's default: a tar set's member; given otherwise, also a manifest's column


@dataclass(frozen=True)
class Reading:
    fetch_timeout_s: float = DEFAULT_DEADLINE_S  # --fetch-timeout: one download, retries included
    label_key: str = DEFAULT_LABEL_KEY  # --label-key: a WebDataset sample's member, or a manifest's column
    prefetch_shards: int = 2  # --prefetch-shards: remote shards each process fetches ahead of the one it reads
    known: bool = True  # the options are the run's (train); False before eval has read its checkpoint's
    multilabel: bool = False  # --task multilabel: labels are sets of classes

    @classmethod
    def of(cls, data) -> Reading:
        """From a DataConfig."""
        return cls(data.fetch_timeout, data.label_key, data.prefetch_shards, multilabel=data.task == "multilabel")
