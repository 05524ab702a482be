"""Small helpers that several commands share; the standard library only (no torch)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List, Sequence


def markdown_table(columns: Sequence[str], rows: List[Dict]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(format_cell(row.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def format_cell(value) -> str:
    """Three significant digits below 100, whole numbers above; blanks for missing values."""
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return "" if value is None else str(value)


def flags(options: Dict[str, object]) -> List[str]:
    """{"img-size": 32, "data": path} -> ["--img-size", "32", "--data", "path"]: a command line from a dict."""
    return [item for name, value in options.items() for item in (f"--{name}", str(value))]


def write_json_atomic(path: Path, obj: Dict) -> None:
    """Write through a temporary file and rename: readers see the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(obj) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def fsync_dir(folder: Path) -> None:
    """Make a rename inside `folder` durable (best effort: some file systems refuse)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
