"""Small helpers that several commands share; the standard library only (no torch)."""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

# Nouns whose "ch" is said "k": they take an "s" ("epochs"), not the "es" of "batches".
HARD_CH = ("epoch", "stomach", "monarch")


def counted(n: int, noun: str, plural: Optional[str] = None) -> str:
    """'1 process', '2 processes', '1 loader worker', '3 epochs': a count with its noun in the number it needs."""
    if n == 1:
        return f"{n} {noun}"
    sibilant = noun.endswith(("s", "x", "ch", "sh")) and not noun.endswith(HARD_CH)
    return f"{n} {plural or (noun + 'es' if sibilant else noun + 's')}"


def top5_says_something(classes: int) -> bool:
    """Whether top-5 accuracy can be below 1: with 5 classes or fewer, five guesses always hold the right one."""
    return classes > 5


def one_line(name: str) -> str:
    """A file name as it can stand in one log line: as it is where every character prints, else with the control
    characters (a newline, a tab) and the stand-ins for bytes that are not UTF-8 escaped as Python writes them."""
    return name if name.isprintable() else repr(name)[1:-1]


def ranks_named(ranks: Sequence[int]) -> str:
    """'rank 1', 'ranks 1, 2'."""
    return f"{'rank' if len(ranks) == 1 else 'ranks'} {', '.join(map(str, ranks))}"


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


class DamagedLine(ValueError):
    """A line in the middle of a JSON-lines file that is not a JSON object: the file was changed by hand or
    damaged, and reading on would hide it."""


def read_epoch_records(path: Path) -> Tuple[List[Dict], Optional[str]]:
    """The records of a metrics.jsonl-style file (one JSON object with an integer `epoch` per line) and, when its
    last line is unreadable (a crash in the middle of an append), that line, left out. An unreadable line
    anywhere else raises DamagedLine naming the line."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    numbered = [(number, line) for number, line in enumerate(lines, 1) if line.strip()]
    records: List[Dict] = []
    for position, (number, line) in enumerate(numbered):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if isinstance(record, dict) and isinstance(record.get("epoch"), int):
            records.append(record)
        elif position == len(numbered) - 1:
            return records, line
        else:
            raise DamagedLine(
                f"{path}:{number} is not a metrics line (a JSON object with an epoch); remove or repair that line"
            )
    return records, None


def write_text_atomic(path: Path, text: str) -> None:
    """Write through a fsync'd temporary file and rename: a crash or a full disk leaves the old file whole."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


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


_SECRET_QUERY = re.compile(
    r"([?&](?:[^=&#\s]*(?:token|signature|secret|password|passwd|credential|key|auth|sig)[^=&#\s]*)=)[^&#\s]*",
    re.IGNORECASE,
)
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)([^/@\s:]+)(:[^/@\s]*)?@")


def redact(text: str) -> str:
    """`text` with the credentials of any URL in it hidden: `https://user:secret@host/` -> `https://user:***@host/`,
    `https://token@host/` -> `https://***@host/`,
    `?token=abc` / `X-Amz-Signature=...` -> `=***`. Whatever ddptrain prints, logs or sends to a tracker about a URL
    goes through this first."""
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2) + ':***' if m.group(3) else '***'}@", text)
    return _SECRET_QUERY.sub(r"\1***", text)


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs on this host. A zombie (killed, not yet reaped: common in containers whose first
    process reaps nothing) does not run."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc here: the signal test is all there is
    return state not in ("Z", "X")


_GOLDEN = 0x9E3779B97F4A7C15  # the golden ratio in 64 bits: spreads nearby integers far apart


def mix_seed(*parts: int) -> int:
    """One seed from several integers (seed, epoch, index, rank, ...), the same on every platform and process:
    every random draw ddptrain makes is seeded by this function of what it depends on, and of nothing else."""
    value = int(parts[0]) if parts else 0
    for part in parts[1:]:
        value = value * _GOLDEN + int(part)
    return value % (2**63 - 1)


# What other tools keep beside the weights that unpickles as plain data, running no code: timm's train.py stores
# its command line as an argparse.Namespace in every checkpoint it writes. Allowed to torch.load(weights_only=True).
PLAIN_DATA_GLOBALS: List[Any] = [argparse.Namespace]
_UNSUPPORTED_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")


def load_refusal(error: BaseException) -> str:
    """Why torch.load(weights_only=True) refused a file, in one line (torch's own is eight, with terminal escapes
    and advice to load it with weights_only=False)."""
    found = _UNSUPPORTED_GLOBAL.search(str(error))
    if found:
        return f"it holds a pickled `{found.group(1)}`, which could run code when loaded"
    return first_line(error)


def first_line(error: BaseException | str, limit: int = 300, kind: bool = False) -> str:
    """What an error says in one line: libraries' messages run over many lines of advice, the first says what
    happened (`kind`: prefixed with the exception's type)."""
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else ("" if kind else type(error).__name__)
    if kind and isinstance(error, BaseException):
        text = f"{type(error).__name__}: {text}"
    return text[:limit]
