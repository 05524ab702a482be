"""A JSON Lines manifest as a source of data (`--data metadata.jsonl`): one object per line with a path and a label
field, named as in a CSV manifest (`file_name` and `label`, as a Hugging Face `imagefolder` writes its
metadata.jsonl; `path`, `image`, `class`, ...) and an optional `split`. Every rule of the CSV manifest holds (see
manifest.py); a label may be a list of labels under --task multilabel, as in a Parquet manifest."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

from ...errors import DataError
from ..index import LABEL_SEPARATOR
from .manifest import ManifestSource, Row, manifest_columns

MAX_LINE = 1 << 20  # bytes: a manifest row is a path and a label; a longer line is not one (and is never held whole)


class JsonLinesManifestSource(ManifestSource):
    name = "JSON Lines manifest"
    kind = "JSON Lines manifest"
    suffixes = (".jsonl",)

    def rows(self, path: Path, label: Optional[str] = None) -> Iterator[Row]:
        columns: Optional[Dict[str, str]] = None
        for number, record in _records(path):
            if columns is None:
                columns = manifest_columns(path, list(record), label)
            which = _text(record.get(columns["split"])) if "split" in columns else None
            yield number, _text(record.get(columns["path"])), _text(record.get(columns["label"])), which
        if columns is None:
            raise DataError(f"{path} lists no images")


def _records(path: Path) -> Iterator[Tuple[int, Dict[str, Any]]]:
    """(line number, object) for each line that is not blank; one error naming the line for any other."""
    with open(path, "rb") as handle:
        number = 0
        while raw := handle.readline(MAX_LINE + 1):
            number += 1
            if len(raw) > MAX_LINE:
                raise DataError(f"{path}:{number}: a line over {MAX_LINE >> 20} MiB is not a manifest row")
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")  # a byte-order mark before the first
            except UnicodeDecodeError as error:
                raise DataError(f"{path}:{number} is not UTF-8 text ({error.reason}); save it as UTF-8") from None
            try:
                record = json.loads(text)
            except json.JSONDecodeError as error:
                raise DataError(f"{path}:{number} is not JSON ({error.msg}); write one object per line") from None
            if not isinstance(record, dict):
                raise DataError(
                    f"{path}:{number}: each line is a JSON object such as {EXAMPLE}, not {text.strip()[:40]!r}"
                )
            yield number, record


EXAMPLE = '{"file_name": "0001.jpg", "label": "cat"}'


def _text(value: Any) -> str:
    """A field as the manifest's text: a list of labels joined as a|b (--task multilabel); a number as written,
    except that a whole float is its integer (`1.0`, as pandas writes an integer column that had a gap, is class
    `1`, as in a Parquet manifest) and NaN is no value; true and false as JSON and Parquet write them."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, list):
        return LABEL_SEPARATOR.join(map(_text, value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
