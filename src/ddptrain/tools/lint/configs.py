"""Rendezvous settings a program reads from the YAML and JSON configuration files of its repository.

`init_process_group(init_method=hp.dist_config.dist_url)` hard-codes nothing in Python, but a `config/*.yaml` that
says `dist_config: {dist_url: "tcp://localhost:54321"}` does: every run of that config on a node rendezvouses on
the same port; so does hifi-gan's `config_v1.json` with `"dist_config": {"dist_url": "tcp://localhost:54321"}`.
YAML files are read as indented `key: value` lines (no YAML library: this is lint's only use of them, and it must
stay fast and torch-free), JSON files that mention a port with `json`; only values that look like a port or a
`tcp://host:port` address are kept, each with the path of keys above it.

The same files' shell scripts are read for the commands that launch a program (`torchrun --standalone
train.py`: it runs on one node).

Hostile folders are bounded: symbolic links are not followed, FIFOs and devices are not read, files over
`MAX_BYTES` and folders past `MAX_FILES` configuration files are skipped, unreadable or undecodable files are read as far as they decode,
JSON nested past `MAX_DEPTH` is not followed.
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

SUFFIXES = (".yaml", ".yml", ".json")
SHELL_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
# a command that starts the processes of a job: torchrun, `python -m torch.distributed.run/launch`, accelerate
LAUNCHER = re.compile(r"\btorchrun\b|torch\.distributed\.(?:run|launch)\b|\baccelerate\s+launch\b")
PY_FILE = re.compile(r"(?<![\w./-])([\w./-]+\.py)\b")
ONE_NODE = re.compile(r"--standalone\b|--nnodes(?:=|\s+)1(?::1)?(?![\w:])|--num_machines(?:=|\s+)1(?!\w)")
SKIPPED_FOLDERS = {".git", ".hg", "node_modules", "__pycache__", ".venv", "venv", "site-packages", ".tox"}
MAX_FILES = 5000
MAX_BYTES = 1 << 20
MAX_DEPTH = 32
JSON_PORT = re.compile(r'tcp://|port"\s*:\s*"?\d', re.IGNORECASE)  # worth parsing
KEY_LINE = re.compile(r"^(\s*(?:-\s+)?)([A-Za-z_][\w.-]*)\s*:(?:\s+(.*?))?\s*$")
PORT = re.compile(r"^\d{2,5}$")
TCP_ADDRESS = re.compile(r"^tcp://[^\s]*:\d{2,5}/?$")


@dataclass(frozen=True)
class Setting:
    keys: Tuple[str, ...]  # the keys above the value, outermost first
    value: str
    file: Path
    line: int


def fixed_settings(keys: Sequence[str], root: Path, address: bool) -> List[Setting]:
    """The settings under `root` whose key path ends with `keys` and whose value is a fixed port (`address`: a
    `tcp://host:port` address). A single key must be a top-level one: `args.port` is not `visdom: {port: 8097}`."""
    wanted = tuple(keys)
    pattern = TCP_ADDRESS if address else PORT
    return [
        s
        for s in _settings(root)
        if s.keys[-len(wanted) :] == wanted and (len(wanted) > 1 or len(s.keys) == 1) and pattern.match(s.value)
    ]


@functools.lru_cache(maxsize=64)
def _settings(root: Path) -> Tuple[Setting, ...]:
    found: List[Setting] = []
    for path in _files_under(root):
        found.extend(_read(path))
    return tuple(found)


def clear() -> None:
    """Forget what the folders held (a long-lived process linting again after they changed)."""
    _settings.cache_clear()
    _launch_commands.cache_clear()
    _walk.cache_clear()
    _spell_the_prefix.cache_clear()


def candidate_files(root: Path) -> List[Path]:
    """The YAML, JSON and shell files under `root` that settings and launch commands are read from (cache.py
    hashes them)."""
    return list(_walk(root))


def launch_commands(root: Path) -> Tuple[str, ...]:
    """The commands in the shell scripts under `root` that start a job's processes (`torchrun ... train.py`), each
    on one line (continuation backslashes joined)."""
    return _launch_commands(root)


@functools.lru_cache(maxsize=64)
def _launch_commands(root: Path) -> Tuple[str, ...]:
    commands: List[str] = []
    for path in _files_under(root, SHELL_SUFFIXES):
        text = small_text(path)
        if text is None:
            continue
        for line in re.sub(r"\\\r?\n", " ", text).splitlines():
            if LAUNCHER.search(line.partition("#")[0]):
                commands.append(line.partition("#")[0])
    return tuple(commands)


def launched_on_one_node(root: Path, entry: Path) -> bool:
    """Every command of the repository's shell scripts that launches `entry` runs one node (`--standalone`,
    `--nnodes=1`), and there is at least one: the program's authors run it on one machine. A command names the
    entry by a path relative to the folder it runs in, which a script does not say: `train.py` and
    `../tools/train.py` both name `tools/train.py`."""
    mine = commands_launching(root, entry)
    return bool(mine) and all(ONE_NODE.search(c) for c in mine)


def commands_launching(root: Path, entry: Path) -> List[str]:
    """The launch commands of the repository's shell scripts that name `entry`."""
    relative = entry.relative_to(root).as_posix() if entry.is_relative_to(root) else entry.name

    def names_entry(command: str) -> bool:
        for token in PY_FILE.findall(command):
            token = re.sub(r"^(?:\.\.?/)+", "", token)
            if relative == token or relative.endswith("/" + token) or token.endswith("/" + relative):
                return True
        return False

    return [c for c in launch_commands(root) if names_entry(c)]


CUT_KEY_PATTERN = r"\b(?:k|key|name|n)\[\s*7\s*:\s*\]"  # a key cut after its first seven characters: `k[7:]`
CUT_KEY = re.compile(CUT_KEY_PATTERN)
PREFIX_STRING = re.compile(  # 'module.', "^module\\." in a string, or a key cut after its first seven characters
    r"""['"]\^?module(?:\.|\\\\?\.)|""" + CUT_KEY_PATTERN
)
MAX_BESIDE = 200  # scripts of one folder read for the prefix (a folder of thousands is no repository's own)


def scripts_spell_the_prefix(folder: Path) -> bool:
    """A script of `folder` spells DDP's 'module.' key prefix (`rename.py`: `if key.startswith('module.'):`) or cuts
    its seven characters off the keys (`test.py`: `{k[7:]: v for k, v in state.items()}`): the repository converts
    the checkpoints it saves from the wrapper."""
    return _spell_the_prefix(folder)


@functools.lru_cache(maxsize=256)
def _spell_the_prefix(folder: Path) -> bool:
    try:
        scripts = sorted(p for p in folder.iterdir() if p.suffix == ".py")[:MAX_BESIDE]
    except OSError:
        return False
    return any(PREFIX_STRING.search(small_text(p) or "") for p in scripts)


def _files_under(root: Path, suffixes: Tuple[str, ...] = SUFFIXES) -> List[Path]:
    """The configuration files under `root` (`suffixes`: the shell scripts), from the one walk of `_walk`."""
    return [path for path in _walk(root) if path.name.endswith(suffixes)]


@functools.lru_cache(maxsize=64)
def _walk(root: Path) -> Tuple[Path, ...]:
    """The configuration and shell files under `root` (one walk for both), at most `MAX_FILES`."""
    files: List[Path] = []
    for folder, subfolders, names in os.walk(root, followlinks=False):
        subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED_FOLDERS)
        for name in sorted(names):
            if name.endswith(SUFFIXES + SHELL_SUFFIXES):
                files.append(Path(folder) / name)
                if len(files) >= MAX_FILES:
                    return tuple(files)
    return tuple(files)


def small_text(path: Path) -> Optional[str]:
    """A regular file's text, as far as it decodes; None for a link, a FIFO or device (opened without waiting for
    a writer), a file over `MAX_BYTES` or one that cannot be read."""
    try:
        if path.is_symlink():
            return None
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(handle, "rb") as opened:
            info = os.fstat(opened.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
                return None
            return opened.read(MAX_BYTES + 1).decode("utf-8", errors="replace")
    except OSError:
        return None


def _read(path: Path) -> List[Setting]:
    text = small_text(path)
    if text is None:
        return []
    return _read_json(path, text) if path.suffix == ".json" else _read_yaml(path, text)


def _read_json(path: Path, text: str) -> List[Setting]:
    if not JSON_PORT.search(text):
        return []
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return []
    if not isinstance(data, dict):
        return []  # records (annotations, a dataset's index), not a configuration
    settings: List[Setting] = []

    def visit(node: Any, keys: Tuple[str, ...], depth: int) -> None:
        if depth > MAX_DEPTH:
            return
        if isinstance(node, dict):
            for key, value in node.items():
                visit(value, (*keys, str(key)), depth + 1)
        elif isinstance(node, list):  # a list's items hold the list's keys
            for value in node:
                visit(value, keys, depth + 1)
        elif keys and isinstance(node, (str, int)) and not isinstance(node, bool):
            value = str(node)
            if PORT.match(value) or TCP_ADDRESS.match(value):
                settings.append(Setting(keys, value, path, _line_of(text, keys[-1])))

    visit(data, (), 0)
    return settings


def _line_of(text: str, key: str) -> int:
    at = text.find(f'"{key}"')
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


def _read_yaml(path: Path, text: str) -> List[Setting]:
    settings: List[Setting] = []
    above: List[Tuple[int, str]] = []  # (indent, key) of the keys that hold the lines below them
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped in ("---", "..."):
            continue
        match = KEY_LINE.match(_without_comment(line))
        if match is None:
            continue
        indent, key, value = len(match.group(1)), match.group(2), (match.group(3) or "")
        while above and above[-1][0] >= indent:
            above.pop()
        if not value:
            above.append((indent, key))
            continue
        value = value.strip("\"'")
        if PORT.match(value) or TCP_ADDRESS.match(value):
            settings.append(Setting((*[k for _, k in above], key), value, path, number))
    return settings


def _without_comment(line: str) -> str:
    """`port: 29500  # the default` -> `port: 29500` (a `#` inside quotes stays)."""
    quote = ""
    for i, char in enumerate(line):
        if char in "\"'" and (not quote or quote == char):
            quote = "" if quote else char
        elif char == "#" and not quote and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line
