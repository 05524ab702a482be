"""Where options come from: command-line flags, a YAML file (flat or nested by section), and `config.yaml`, which
every run writes and `--config RUN_DIR/config.yaml` reads back. `config.yaml` says its format (`config_version`); a
newer one is refused naming both versions, an older one migrated (`migrate`). Unknown keys are refused, each with
the option it most likely means."""

from __future__ import annotations

import argparse
import difflib
import functools
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import yaml

from ..errors import ConfigError
from ..util import first_line
from ..version import __version__
from .schema import WORDS, Config, Option, _convert, check_known_keys, options
from .sections import SECTION_TITLES, SECTIONS, parse_channels, parse_kwargs
from .timmargs import timm_args_refusal

CONFIG_VERSION = 2  # 2: per-channel values as lists of numbers; `tensorboard` no longer a --log-to choice
VERSION_KEY = "config_version"


def _channels_flag(text: str) -> Tuple[float, ...]:
    values = parse_channels(text)
    if values is None:
        raise argparse.ArgumentTypeError(f"three numbers, one per RGB channel, such as 0.5,0.5,0.5; not {text!r}")
    return values


def _kwargs_flag(text: str) -> Dict[str, Any]:
    values = parse_kwargs(text)
    if values is None:
        raise argparse.ArgumentTypeError(f"keyword arguments such as width=32,depth=3; not {text!r}")
    return values


def _word_or_number(option: Option, text: str) -> Any:
    value, problem = _convert(option, text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


# ---- flags ----------------------------------------------------------------------------------------
def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per option, grouped by section. Defaults are SUPPRESSed so we know what the user typed."""
    groups = {name: parser.add_argument_group(title) for name, title in SECTION_TITLES.items()}
    for option in options().values():
        kw: Dict[str, Any] = {"dest": option.flat, "default": argparse.SUPPRESS}
        if option.type is bool:
            kw["action"] = argparse.BooleanOptionalAction
        elif option.type is tuple:
            kw["type"] = _channels_flag
        elif option.type is dict:
            kw["type"] = _kwargs_flag
        elif option.flat in WORDS:
            kw["type"] = functools.partial(_word_or_number, option)
        else:
            kw["type"] = option.type
            if option.choices:
                kw["choices"] = list(option.choices)
        shown = option.default not in (None, False, "")
        kw["help"] = f"{option.help} (default: {option.default})" if shown else option.help
        groups[option.section].add_argument(option.flag, **kw)


def add_option_flags(parser: argparse.ArgumentParser, names: List[str]) -> None:
    """Some of `train`'s options on another command (eval, predict), with train's types, choices, help and defaults."""
    for name in names:
        option = options()[name]
        kw: Dict[str, Any] = {"dest": name, "default": option.default, "type": option.type}
        if option.choices:
            kw["choices"] = list(option.choices)
        shown = option.default not in (None, False, "")
        kw["help"] = f"{option.help} (default: {option.default})" if shown else option.help
        parser.add_argument(option.flag, **kw)


# ---- YAML -----------------------------------------------------------------------------------------
def load_yaml(path: str | Path) -> Dict[str, Any]:
    """A config file's options as flat keys, converted to their types; flat or nested form."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as error:
        raise ConfigError(f"config file {path} is not UTF-8 text ({error.reason}); save it as UTF-8") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is not valid YAML: {first_line(error)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of option names to values")
    refused = timm_args_refusal(data, str(path))
    if refused:
        raise ConfigError(refused)
    data = migrate(data, str(path))
    flat = _flatten(data, str(path))
    check_known_keys(flat, str(path))
    converted = {key: _convert(options()[key], value) for key, value in flat.items()}
    problems = [problem for _, problem in converted.values() if problem]
    if len(problems) == 1:
        raise ConfigError(f"config file {path}: {problems[0]}")
    if problems:
        raise ConfigError(f"config file {path}: {len(problems)} values cannot be used: {'; '.join(problems)}")
    return {key: _home_expanded(key, value) for key, (value, _) in converted.items()}


# Options that name files or folders: in a config file `~/datasets/x` means the user's home, as the shell reads it on
# the command line (YAML leaves the `~` as it is).
PATH_OPTIONS = frozenset({"data", "out", "resume", "weights", "model"})


def _home_expanded(key: str, value: Any) -> Any:
    if key in PATH_OPTIONS and isinstance(value, str) and value.startswith("~"):
        return os.path.expanduser(value)
    return value


# Options a run records as absolute paths when they name local files or folders: `--config RUN_DIR/config.yaml`,
# `eval` and `report` then find the run's own files from any folder, never another folder of the same relative name.
RECORDED_PATHS = ("data", "out", "resume", "weights", "model", "class_weights")
_SCHEME = re.compile(r"^[A-Za-z][\w+.-]*:")  # hf:NAME, wds:PATH, dataset://NAME, s3://..., timm:NAME, a module:FACTORY
_WORDS = frozenset({"auto", "none"})  # --resume auto, --class-weights auto|none


def names_a_local_path(value: str) -> bool:
    """A path on this machine, not a name with a scheme (hf:NAME, wds:PATH, s3://..., a module:FACTORY)."""
    return not _SCHEME.match(value)


def as_recorded(config: Config) -> Config:
    """`config` as a run records it (config.yaml, its checkpoints, its trackers): each local path in RECORDED_PATHS
    absolute, from the current folder; names, URLs and words as given."""
    flat = config.to_flat()
    changed = {}
    for key in RECORDED_PATHS:
        value = flat.get(key)
        if isinstance(value, str) and value and value not in _WORDS:
            absolute = _absolute(key, value)
            if absolute != value:
                changed[key] = absolute
    return config.replace(**changed) if changed else config


def _absolute(key: str, value: str) -> str:
    if key == "model":  # path/to/file.py:FACTORY; a package.module:FACTORY or a torchvision/timm name stays
        where, _, factory = value.rpartition(":")
        return f"{os.path.abspath(where)}:{factory}" if where.endswith(".py") else value
    if value.startswith("wds:") and "://" not in value:
        return "wds:" + os.path.abspath(value[len("wds:") :])
    return os.path.abspath(value) if names_a_local_path(value) else value


def _flatten(data: Mapping, source: str) -> Dict[str, Any]:
    """`{optim: {lr: 0.1}, epochs: 3}` -> `{lr: 0.1, epochs: 3}`; a section given as a mapping is nested
    (`data: {path: ...}`), the same name with a plain value is the flat option (`data: /images`)."""
    flat: Dict[str, Any] = {}
    for raw_key, value in data.items():
        key = str(raw_key).replace("-", "_")
        entries = (
            _section_entries(key, value, source) if key in SECTIONS and isinstance(value, dict) else [(key, value)]
        )
        for flat_key, entry in entries:
            if flat_key in flat:
                raise ConfigError(f"option '{flat_key}' is given twice in {source} (flat and nested)")
            flat[flat_key] = entry
    return flat


def _section_entries(section: str, values: Mapping, source: str) -> List[Tuple[str, Any]]:
    by_name = {name: o.flat for o in options().values() if o.section == section for name in (o.attr, o.flat)}
    entries = []
    for raw_key, value in values.items():
        key = str(raw_key).replace("-", "_")
        if key not in by_name:
            close = difflib.get_close_matches(key, list(by_name), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"unknown option {section + '.' + key!r} in {source}{hint}")
        entries.append((by_name[key], value))
    return entries


def build_config(cli_values: Mapping[str, Any], config_file: Optional[str] = None) -> Config:
    """Merge the defaults, an optional YAML file and the flags the user typed; convert and validate."""
    merged: Dict[str, Any] = dict(load_yaml(config_file)) if config_file else {}
    if config_file:
        _refuse_paths_meant_from_the_file(Path(config_file), {k: v for k, v in merged.items() if k not in cli_values})
    merged.update(cli_values)
    return Config.from_flat(merged, "the command line").validate()


INPUT_PATHS = ("data", "weights", "resume")  # options naming files or folders that must be there


def _refuse_paths_meant_from_the_file(path: Path, from_file: Mapping[str, Any]) -> None:
    """A relative path in a config file is read from the current folder, as on the command line. One that is not
    there but is beside the file was written from the file's folder: refused, naming both places."""
    for key in INPUT_PATHS:
        value = from_file.get(key)
        if (
            not isinstance(value, str)
            or not value
            or value in _WORDS
            or os.path.isabs(value)
            or not names_a_local_path(value)
        ):
            continue
        beside = os.path.normpath(path.parent.absolute() / value)
        if not os.path.exists(value) and os.path.exists(beside):
            raise ConfigError(
                f"config file {path}: {key} {value} is read from the current folder ({os.getcwd()}), where it does "
                f"not exist; from the file's folder it is {beside}: write that path, or run from {path.parent}"
            )


def save_yaml(config: Config, path: str | Path) -> None:
    """config.yaml in the flat form, its format first: `--config RUN_DIR/config.yaml` repeats the run."""
    flat = {key: list(value) if isinstance(value, tuple) else value for key, value in config.to_flat().items()}
    Path(path).write_text(yaml.safe_dump({VERSION_KEY: CONFIG_VERSION, **flat}, sort_keys=False))


def migrate(data: Dict[str, Any], source: str) -> Dict[str, Any]:
    """A config file's mapping in the current format, its version key removed: a newer one is refused (naming both
    versions), an older one brought up to date. A file without the key is format 1 (every file before 2026-12, and
    users' own configs, which need nothing more)."""
    data = dict(data)
    found = data.pop(VERSION_KEY, 1)
    if not isinstance(found, int) or isinstance(found, bool) or found > CONFIG_VERSION:
        raise ConfigError(
            f"{source} is a config of format {found}; this ddptrain ({__version__}) reads formats up to "
            f"{CONFIG_VERSION}: use the newer ddptrain that wrote it"
        )
    if found < 2:  # per-channel values were texts ("0.5,0.5,0.5", still read); --log-to named tensorboard
        log_to = data.get("log_to")
        if isinstance(log_to, str):
            data["log_to"] = ",".join(n for n in log_to.split(",") if n.strip().lower() != "tensorboard")
    return data
