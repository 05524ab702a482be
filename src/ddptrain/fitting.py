"""`ddptrain.fit`: the whole of `ddptrain train` — every guarantee, the run directory, preemption, exact resume,
EMA, Mixup, exact evaluation — from Python, on N processes started the way the command line starts them.

    result = ddptrain.fit(model=build, data=my_dataset, nproc=2, epochs=10, lr=0.1, out="runs/mine")
    result.best_checkpoint, result.best["top1"]

`model`: a `--model` name (`"resnet18"`, `"timm:convnext_tiny"`, `"file.py:build"`), a factory (a function or class
called with `num_classes` and `model_kwargs`) or a model object (each rank trains a copy). `data`: a `--data`
location, a map-style dataset of `(image, label)` items, or a `(train, val)` pair of them (see
`data/sources/pydataset.py` for what such a dataset must guarantee). The options are `train`'s, by their config
names (`batch_size=32`, `val_split=0.25`, `eval_metric="loss"`).

The processes are started by torchrun's agent with the objects pickled to each: by spawning them from a script
(which must then call `fit` under `if __name__ == "__main__":`), by forking them where the caller's objects cannot
be imported again (a notebook, `python -c`), as Accelerate's `notebook_launcher` does."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from . import handed
from .config import Config
from .config.files import build_config
from .errors import ConfigError, DdptrainError
from .runtime.preempt import Preempted

START_METHODS = ("auto", "spawn", "fork")


@dataclass
class FitResult:
    """What a finished `fit` left in its run directory."""

    run_dir: Path
    last_checkpoint: Path
    best_checkpoint: Optional[Path]  # None when nothing was evaluated
    best: Optional[Dict[str, Any]]  # best_eval.json: the best evaluation's figures (top1, top5, loss, per class)
    metrics: List[Dict[str, Any]]  # metrics.jsonl, one record per epoch

    @classmethod
    def read(cls, run_dir: Path) -> FitResult:
        checkpoints = run_dir / "checkpoints"
        best_eval = run_dir / "best_eval.json"
        lines = (run_dir / "metrics.jsonl").read_text().splitlines() if (run_dir / "metrics.jsonl").is_file() else []
        sharded = (checkpoints / "last.dcp").exists()  # --strategy fsdp: checkpoint folders
        last, best = (
            (checkpoints / "last.dcp", checkpoints / "best.dcp")
            if sharded
            else (
                checkpoints / "last.pt",
                checkpoints / "best.pt",
            )
        )
        return cls(
            run_dir,
            last,
            best if best.exists() else None,
            json.loads(best_eval.read_text()) if best_eval.is_file() else None,
            [json.loads(line) for line in lines if line.strip()],
        )


def fit(
    model: Any,
    data: Any,
    *,
    nproc: int = 1,
    out: str | os.PathLike = "runs/fit",
    start_method: str = "auto",
    verbose: bool = False,
    **options: Any,
) -> FitResult:
    """Train `model` on `data` on `nproc` processes with `train`'s `options`; return what the run left. Errors are
    raised as `DdptrainError` (one line, naming the rank); a preempted run raises `Preempted` after saving, and
    `fit(..., resume="auto")` continues it."""
    objects: Dict[str, Any] = {}
    flat = {
        **options,
        "model": _model_name(model, objects),
        "data": _data_name(data, objects),
        "out": os.fspath(out),
        "nproc": nproc,
    }
    cfg = build_config(flat)
    method = _start_method(start_method)
    for name, value in objects.items():
        handed.hand(name, value)  # the checks below, and the forked workers, see them
    from .checks import check_before_start
    from .runtime.launch import Entrypoint, launch

    check_before_start(cfg)
    launch(cfg.launch, [], verbose, entrypoint=Entrypoint(_worker, (cfg.to_flat(), objects), method))
    return FitResult.read(Path(cfg.run.out))


def _model_name(model: Any, objects: Dict[str, Any]) -> str:
    """The name the run records for `model`: as given, the factory's import path (`/abs/file.py:build`,
    `package.module:build`) or, for an object or a factory that cannot be imported again, `object://NAME`."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    from torch import nn

    if isinstance(model, nn.Module):
        name = handed.OBJECT_PREFIX + type(model).__qualname__
    elif callable(model):
        name = _import_path(model) or handed.OBJECT_PREFIX + getattr(model, "__qualname__", type(model).__name__)
    else:
        raise ConfigError(
            f"model={model!r}: give a --model name, a factory (called with num_classes) or an nn.Module object"
        )
    objects[name] = model
    return name


def _import_path(factory: Any) -> Optional[str]:
    """`/abs/file.py:build` or `package.module:build` when `factory` can be found again by that name (a module-level
    function or class); None otherwise (a lambda, a nested function, a notebook's cell)."""
    qualname = getattr(factory, "__qualname__", "")
    module = sys.modules.get(getattr(factory, "__module__", "") or "")
    if not qualname or "<" in qualname or module is None:
        return None
    path = getattr(module, "__file__", None)
    if "." in module.__name__ or module.__name__ == "__mp_main__":  # in a package: by its import path
        return f"{module.__name__}:{qualname}" if module.__name__ != "__mp_main__" else None
    # the script itself, or a module beside it: by its file, which `--model FILE:FACTORY` imports from anywhere
    return f"{os.path.abspath(path)}:{qualname}" if path and os.path.isfile(path) else None


def _main_file() -> Optional[str]:
    """The script `__main__` runs from; None in a notebook, `python -c` or `python -` (stdin)."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    return path if path and os.path.isfile(path) else None


def _data_name(data: Any, objects: Dict[str, Any]) -> str:
    if isinstance(data, (str, os.PathLike)):
        return os.fspath(data)
    parts = data if isinstance(data, tuple) else (data,)
    if len(parts) not in (1, 2) or not all(hasattr(p, "__getitem__") and hasattr(p, "__len__") for p in parts):
        raise ConfigError(
            f"data={type(data).__name__}: give a --data location, a dataset of (image, label) items (__getitem__ "
            "and __len__), or a (train, val) pair of them"
        )
    name = handed.DATASET_PREFIX + "+".join(type(p).__qualname__ for p in parts)
    objects[name] = data
    return name


def _start_method(requested: str) -> str:
    """spawn from a script; fork where `__main__` is no file (a notebook), refused once CUDA is initialised here."""
    if requested not in START_METHODS:
        raise ConfigError(f"start_method must be one of {', '.join(START_METHODS)}, not {requested!r}")
    if requested != "auto":
        method = requested
    else:
        method = "spawn" if _main_file() else "fork"
    if method == "fork" and "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
        raise ConfigError(
            "ddptrain.fit forks its processes here (a notebook), and CUDA is already initialised in this process: a "
            "forked process cannot use it. Restart the kernel and call fit before anything touches the GPU"
        )
    return method


def _worker(flat: Dict[str, Any], objects: Dict[str, Any]) -> None:
    """One rank: the objects handed over, then the same job `ddptrain train` runs in a worker. A ddptrain error is
    one line on stderr and the rank's exit status, as on the command line."""
    from .logs import setup_logging
    from .runtime.env import detect
    from .train.job import run

    for name, value in objects.items():
        handed.hand(name, value)
    # a spawned rank inherits "spawn" for its own children; the loader workers are forked as under the command line
    # (and so see the objects handed over above)
    multiprocessing.set_start_method("fork", force=True)
    env = detect()
    setup_logging(env.rank, env.world_size)
    try:
        run(Config.from_flat(flat), env)
    except Preempted as stopped:
        if env.is_main:
            print(f"ddptrain fit: {stopped}", file=sys.stderr, flush=True)
        sys.exit(stopped.exit_code)
    except DdptrainError as error:
        if not error.every_rank or env.local_rank == 0:
            rank = error.rank if error.rank is not None else env.rank
            print(f"ddptrain fit: error: rank {rank}: {error}", file=sys.stderr, flush=True)
        sys.exit(error.exit_code)


__all__: Tuple[str, ...] = ("fit", "FitResult", "Preempted", "DdptrainError")
