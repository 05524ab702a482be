"""What `ddptrain train` can check on this node before any process starts — in milliseconds, without
torch: the data (its source's own check), the model's name or file, the weights and resume files, the run directory,
the trackers, the network interface. (Only a model name that its library's files do not define costs the library's
import, to say so with the closest names.)
Each failure is one line that says what to do, instead of the same error from every worker."""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from pathlib import Path
from typing import FrozenSet, List, Optional, Set

from . import handed
from .config import Config, RunConfig
from .config.files import load_yaml, names_a_local_path
from .config.sections import AUTO_BATCH, TIMM_PREFIX, hub_spelling, is_factory
from .data import sources
from .errors import (
    CheckpointError,
    ConfigError,
    WeightsError,
    missing_tracker_package,
    missing_weights_file,
)
from .train.rundir import check_apart, check_fresh_start, check_metrics_readable, check_not_in_use, run_folder_given
from .train.trackers import TRACKER_MODULES, TRACKERS, check_backend, unknown_tracker


def check_before_start(cfg: Config) -> None:
    check_apart("--out", Path(cfg.run.out), "--data", cfg.data.folder())
    sources.check(cfg.data.folder(), sources.Reading.of(cfg.data))
    sources.check_label_key(cfg.data.folder(), sources.Reading.of(cfg.data))
    check_model_source(cfg.model.name)
    if cfg.optim.class_weights not in ("auto", "none") and not Path(cfg.optim.class_weights).is_file():
        raise ConfigError(
            f"--class-weights {cfg.optim.class_weights}: no such file (auto, none, or a JSON file of class: weight)"
        )
    if cfg.model.weights:
        check_weights_file(Path(cfg.model.weights))
    check_trackers(cfg.run, probe=cfg.launch.node_rank == 0)
    check_needs_gpu(cfg)
    if cfg.run.resume and cfg.run.resume != "auto" and not _is_checkpoint(Path(cfg.run.resume)):
        given = run_folder_given(Path(cfg.run.resume), "--resume", prefer="last")
        raise CheckpointError(
            given
            or f"--resume {cfg.run.resume}: no such checkpoint file (use --resume auto to start "
            "fresh when nothing is there yet)"
        )
    if cfg.launch.node_rank == 0:
        run_dir = Path(cfg.run.out)
        ensure_writable(run_dir)
        if cfg.launch.rdzv_endpoint is None:
            # In an elastic job every node looks like node 0 and one may join while the others train (holding the
            # lock): there, rank 0's own claim at start-up is the check.
            check_fresh_start(run_dir, cfg.run.resume, cfg.run.overwrite)
            check_not_in_use(run_dir)
        if cfg.run.resume:
            check_metrics_readable(run_dir)
    if cfg.launch.uses_launcher:
        from .runtime.launch import network_environment

        network_environment(cfg.launch)  # an --iface that does not exist


def check_eval_inputs(checkpoint: Path, data: Optional[str]) -> None:
    """`ddptrain eval`: the model file exists and the data (given, or the run's own) is what its source expects."""
    if not _is_checkpoint(checkpoint):
        what = "is a folder, not a checkpoint file" if checkpoint.is_dir() else "does not exist"
        raise CheckpointError(run_folder_given(checkpoint) or f"checkpoint {checkpoint} {what}")
    sources.check(data or runs_own_data(checkpoint), sources.Reading(known=False))  # its --label-key: not read yet


def runs_own_data(checkpoint: Path) -> str:
    """The data the run of `checkpoint` (RUN_DIR/checkpoints/FILE) trained on, from RUN_DIR/config.yaml: what
    `eval` scores when no --data is given. Without torch."""
    config = checkpoint.absolute().parent.parent / "config.yaml"
    in_a_run = checkpoint.absolute().parent.name == "checkpoints" and config.is_file()
    try:
        data = load_yaml(config).get("data") if in_a_run else None
    except ConfigError:
        data = None
    if not isinstance(data, str) or not data:
        where = f"{config} names no data" if in_a_run else "it is not in the checkpoints/ folder of a run"
        raise ConfigError(f"give --data to score {checkpoint} on: {where}")
    if names_a_local_path(data) and not Path(data).exists():
        raise ConfigError(f"give --data to score {checkpoint} on: its run's data, {data} (from {config}), is not here")
    return data


def check_needs_gpu(cfg: Config) -> None:
    """Options that need a CUDA device, on a run that will be on the CPU: said before any process starts."""
    auto_batch = cfg.optim.batch_size == AUTO_BATCH
    compiled_shards = cfg.model.compile and cfg.model.strategy == "fsdp"
    if not (auto_batch or compiled_shards or cfg.model.fsdp_offload) or cfg.launch.device == "cuda":
        return
    import torch

    if cfg.launch.device == "auto" and torch.cuda.is_available():
        return
    if auto_batch:
        raise ConfigError(
            "--batch-size auto finds the largest batch that fits a GPU by trying; this run is on the CPU: "
            "give a number, e.g. --batch-size 32"
        )
    if cfg.model.fsdp_offload:
        raise ConfigError(
            "--fsdp-offload moves shards from a CUDA device to CPU memory; this run is on the CPU, where they are "
            "already: drop --fsdp-offload"
        )
    raise ConfigError(
        f"--compile with --strategy fsdp on the CPU: torch {torch.__version__}'s inductor fails to compile the "
        "sharded model's graphs there; drop --compile (or --strategy fsdp) for a CPU run"
    )


def _is_checkpoint(path: Path) -> bool:
    """A checkpoint file, or a sharded checkpoint's folder (--strategy fsdp: NAME.dcp)."""
    return path.is_file() or (path.suffix == ".dcp" and path.is_dir())


def check_model_source(name: str) -> None:
    """A model of the user's own: its file is there, or its module can be found (not imported: that is the workers'
    job, which say what went wrong inside it). A torchvision or timm name: the library has it (`check_model_name`)."""
    hub = hub_spelling(name)
    if hub is not None:
        raise ConfigError(hub)
    if not is_factory(name):
        check_model_name(name)
        return
    if handed.lookup(name) is not None:
        return
    if name.startswith(handed.OBJECT_PREFIX):
        raise ConfigError(handed.absent(name))
    where, _, factory = name.rpartition(":")
    if not factory:
        raise ConfigError(f"--model {name}: name the function or class after the colon, e.g. {where}:build")
    if where.endswith(".py"):
        if not Path(where).is_file():
            what = "is not a regular file" if Path(where).exists() else "does not exist"
            raise ConfigError(f"--model {name}: model file {where} {what}")
        return
    try:
        found = importlib.util.find_spec(where)
    except (ImportError, ValueError) as error:
        found, why = None, f" ({error})"
    else:
        why = ""
    if found is None:
        raise ConfigError(
            f"--model {name}: no module '{where}' here{why}; install it, or add its folder to PYTHONPATH (a file: "
            "write path/to/file.py:FACTORY)"
        )


def check_trackers(run: RunConfig, probe: bool = False) -> None:
    """--log-to mlflow or wandb: the package is installed (found, not imported: MLflow alone takes a second); with
    `probe`, also that its backend opens (a tracking server that answers, credentials it accepts)."""
    for name in run.trackers():
        if name not in TRACKERS:
            raise unknown_tracker(name)
        module = TRACKER_MODULES.get(name)
        if module is not None and importlib.util.find_spec(module) is None:
            raise missing_tracker_package(name)
        if probe and module is not None:
            check_backend(name)


def check_weights_file(path: Path) -> None:
    given = run_folder_given(path, "--weights")
    if given:
        raise WeightsError(given)
    if not path.is_file():
        raise missing_weights_file(path)


def ensure_writable(folder: Path) -> None:
    """Fail when the run directory cannot be created or written. Checks without touching it: only
    rank 0 ever writes there."""
    existing = folder.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"cannot write to --out {folder}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write to --out {folder}: no write permission in {existing}")


def check_model_name(name: str) -> None:
    """A misspelled torchvision or timm model, refused before any process starts (the workers would find it only
    after importing torch and the library, seconds later, on every node). The library's model files are read as
    text for the registered builder's definition (`@register_model ... def NAME(`), which takes milliseconds; a name
    not found there is then looked up in the library itself, so that the text search never refuses a model the
    library has."""
    timm = name.startswith(TIMM_PREFIX)
    library = "timm" if timm else "torchvision"
    builder = name[len(TIMM_PREFIX) :].split(".")[0] if timm else name
    if not _folders(library) or builder in _builders(library):
        return  # found, or the library is not here: the workers say what is missing
    from .models.build import unknown_model

    unknown = unknown_model(name)
    if unknown is not None:
        raise ConfigError(f"--model {name}: {unknown}")


@functools.cache
def _builders(library: str) -> FrozenSet[str]:
    """The builders the library's `models` modules register (none for a version that does not register them: every
    name then goes to the library's own lookup)."""
    names: Set[str] = set()
    for folder in _folders(library):
        for module in (Path(folder) / "models").glob("*.py"):
            try:
                names.update(BUILDER.findall(module.read_text(encoding="utf-8", errors="replace")))
            except OSError:
                continue
    return frozenset(names)


def _folders(library: str) -> List[str]:
    """Where an installed package's files are, without importing it; none where it is not installed."""
    try:
        spec = importlib.util.find_spec(library)
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec is not None else []


# a builder the library registers: `@register_model` (torchvision, timm), other decorators or a decorator's
# continued lines, then `def NAME(`; helpers in the same files (`conv3x3`, `_create_resnet`) are not models
BUILDER = re.compile(r"^@register_model\b[^\n]*\n(?:[@ \t)][^\n]*\n)*?def (\w+)\(", re.M)
