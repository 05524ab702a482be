"""Options as the user sees them (`Option`: flat name, flag, type, default, help) and the one typed `Config` they
make: flat keys in (`lr`, `data`), five sections out, every value converted to its declared type or refused with a
`ConfigError` naming the key (PyYAML reads `lr: 1e-3` as a string)."""

from __future__ import annotations

import difflib
import functools
import typing
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..errors import ConfigError
from .sections import (
    AUTO_BATCH,
    MULTILABEL_METRICS,
    SECTIONS,
    DataConfig,
    LaunchConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
    parse_channels,
    parse_kwargs,
)


@dataclass(frozen=True)
class Option:
    """One option as the user sees it (flat name, flag) and where it lives in `Config`."""

    flat: str
    section: str
    attr: str
    type: type  # bool, int, float, str, tuple (per-channel values) or dict (keyword arguments)
    optional: bool
    default: Any
    help: str
    choices: Optional[Tuple[str, ...]]
    node_local: bool
    elsewhere: Tuple[str, ...]

    @property
    def flag(self) -> str:
        return "--" + self.flat.replace("_", "-")


@functools.cache
def options() -> Dict[str, Option]:
    """Every option by flat name, in declaration order (the order of `config.yaml` and `--help`)."""
    found: Dict[str, Option] = {}
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            base, optional = _unwrap_optional(hints[f.name])
            meta = f.metadata
            flat = meta["flag"] or f.name
            found[flat] = Option(
                flat,
                section,
                f.name,
                base,
                optional,
                f.default,
                meta["help"],
                tuple(meta["choices"]) if meta["choices"] else None,
                meta["node_local"],
                meta["elsewhere"],
            )
    return found


def _unwrap_optional(hint) -> Tuple[type, bool]:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is typing.Union and len(args) == 1:
        return _base(args[0]), True
    return _base(hint), False


def _base(hint) -> type:
    origin = typing.get_origin(hint)
    return origin if origin in (tuple, dict) else hint


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)
    launch: LaunchConfig = field(default_factory=LaunchConfig)

    # ---- the flat form: flags, config.yaml, the `config` entry of checkpoints ----------------------
    @classmethod
    def from_flat(cls, values: Mapping[str, Any], source: str = "the options", strict: bool = True) -> Config:
        """A Config from flat keys (`lr`, `data`). Unknown keys are errors when `strict`; otherwise (a file
        written by another ddptrain version) they are left out. Values are converted to their type."""
        known = options()
        if strict:
            check_known_keys(values, source)
        sections: Dict[str, Dict[str, Any]] = {name: {} for name in SECTIONS}
        for key, value in values.items():
            option = known.get(key)
            if option is not None:
                sections[option.section][option.attr] = coerce(option, value, source)
        return cls(**{name: SECTIONS[name](**kw) for name, kw in sections.items()})

    def to_flat(self) -> Dict[str, Any]:
        return {flat: getattr(getattr(self, o.section), o.attr) for flat, o in options().items()}

    def replace(self, **flat_values: Any) -> Config:
        """A copy with some options changed, by flat name: `cfg.replace(resume="auto")`."""
        return Config.from_flat({**self.to_flat(), **flat_values})

    def shared_values(self) -> Dict[str, Any]:
        """The options every node must agree on (node-local paths and positions left out)."""
        return {flat: value for flat, value in self.to_flat().items() if not options()[flat].node_local}

    # ---- checks that involve several fields -----------------------------------------------------
    def validate(self) -> Config:
        """Every section's checks, then nothing else: what involves several options lives here."""
        for section in (self.data, self.model, self.optim, self.run, self.launch):
            section.validate()
        multilabel = self.data.task == "multilabel"
        if self.optim.eval_metric in MULTILABEL_METRICS and not multilabel:
            raise ConfigError(f"--eval-metric {self.optim.eval_metric} is a multi-label metric: add --task multilabel")
        if self.data.decode == "gpu" and self.launch.device == "cpu":
            raise ConfigError(
                "--decode gpu decodes with nvJPEG on a CUDA device, not with --device cpu: use --decode cpu"
            )
        if self.model.strategy == "fsdp" and self.optim.amp == "fp16":
            raise ConfigError(
                "--amp fp16 needs a loss scaler that FSDP's sharded gradients do not get here: use --amp bf16 (or "
                "off) with --strategy fsdp"
            )
        if self.optim.batch_size == AUTO_BATCH and self.model.strategy == "fsdp":
            raise ConfigError(
                "--batch-size auto tries batches on each process alone, and under --strategy fsdp every forward "
                "gathers from every process: give a number, or find it with --strategy ddp on a model that fits"
            )
        if self.optim.batch_size == AUTO_BATCH and self.launch.device == "cpu":
            raise ConfigError(
                "--batch-size auto finds the largest batch that fits a GPU by trying; with --device cpu there is no "
                "device memory to fill: give a number, e.g. --batch-size 32"
            )
        if self.model.compile and self.model.strategy == "fsdp" and self.launch.device == "cpu":
            raise ConfigError(
                "--compile with --strategy fsdp on the CPU: torch's inductor fails to compile the sharded model's "
                "graphs there; drop --compile (or --strategy fsdp) for a CPU run"
            )
        if self.model.fsdp_offload and self.launch.device == "cpu":
            raise ConfigError(
                "--fsdp-offload moves shards from a CUDA device to CPU memory; with --device cpu "
                "they are there already: drop --fsdp-offload"
            )
        return self


# Words some numeric options take, and the number each stands for.
WORDS: Dict[str, Dict[str, Any]] = {"batch_size": {"auto": AUTO_BATCH}}


# ---- types ----------------------------------------------------------------------------------------
def coerce(option: Option, value: Any, source: str) -> Any:
    """`value` as the option's type, or a ConfigError naming the key and where it came from."""
    converted, problem = _convert(option, value)
    if problem:
        raise ConfigError(f"{source}: {problem}")
    return converted


def _convert(option: Option, value: Any) -> Tuple[Any, Optional[str]]:
    """(converted value, None), or (None, what is wrong with it)."""
    if value is None:
        return None, None if option.optional else f"{option.flat} must have a value (default: {option.default})"
    if option.flat in WORDS and isinstance(value, str) and value.strip().lower() in WORDS[option.flat]:
        return WORDS[option.flat][value.strip().lower()], None
    converted = _CONVERTERS[option.type](value)
    if option.choices and converted not in option.choices:
        return None, f"{option.flat} must be one of {', '.join(option.choices)}, not {value!r}"
    if converted is None:
        kind = {
            bool: "true or false",
            int: "a whole number",
            float: "a number",
            str: "a text",
            tuple: "three numbers, one per RGB channel, such as 0.5,0.5,0.5",
            dict: "keyword arguments such as width=32,depth=3 (or a mapping in a config file)",
        }[option.type]
        return None, f"{option.flat} must be {kind}, not {value!r}"
    return converted, None


def _to_bool(value: Any) -> Optional[bool]:
    return value if isinstance(value, bool) else None


def _to_int(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    number = _to_float(value)
    return int(number) if number is not None and number.is_integer() else None


def _to_float(value: Any) -> Optional[float]:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):  # YAML 1.1 reads 1e-3 (no dot) as a string
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _to_str(value: Any) -> Optional[str]:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):  # `nnodes: 2`, `rdzv_id: 7`
        return str(value)
    return None


_CONVERTERS = {
    bool: _to_bool,
    int: _to_int,
    float: _to_float,
    str: _to_str,
    tuple: parse_channels,
    dict: parse_kwargs,
}


SUGGESTION_CUTOFF = 0.85  # difflib similarity: below it, a "did you mean" misleads more than it helps
SHOWN_UNKNOWN = 12


def _likely_option(key: str, known: List[str]) -> Optional[str]:
    """The ddptrain option another tool's name stands for, or a close spelling of one."""
    for option in options().values():
        if key in option.elsewhere:
            return option.flat
    close = difflib.get_close_matches(key, known, 1, SUGGESTION_CUTOFF)
    return close[0] if close else None


def check_known_keys(values: Mapping[str, Any], source: str) -> None:
    """Every unknown option at once (a config written for another tool has dozens), each with the
    ddptrain option it most likely means when one is close."""
    known = list(options())
    unknown = [key for key in values if key not in known]
    if not unknown:
        return
    hints = {key: hint for key in unknown if (hint := _likely_option(key, known))}
    if len(unknown) == 1:
        key = unknown[0]
        hint = f"; did you mean '{hints[key]}'?" if key in hints else ""
        raise ConfigError(f"unknown option {key!r} in {source}{hint}")
    shown = ", ".join(repr(key) if not key.isprintable() or not key else key for key in unknown[:SHOWN_UNKNOWN]) + (
        f" and {len(unknown) - SHOWN_UNKNOWN} more" if len(unknown) > SHOWN_UNKNOWN else ""
    )
    likely = "; ".join(f"{key if key.isprintable() else repr(key)} -> {name}" for key, name in hints.items())
    raise ConfigError(
        f"{len(unknown)} options in {source} are not ddptrain options: {shown}"
        + (f". Perhaps: {likely}" if likely else "")
        + ". `ddptrain train --help` lists every option"
    )
