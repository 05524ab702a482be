"""ddptrain: image-classification training from one device to many with DistributedDataParallel.

The command line is `ddptrain` (see `ddptrain --help`); `ddptrain.fit(model=..., data=..., nproc=N, **options)` runs
the same training from Python (ddptrain.fitting). For your own training loop the library API
is importable from here — `ddptrain.setup()`, `prepare_model`, `train_loader`, `eval_loader`,
`reduce_sum`, `save_checkpoint`, `load_checkpoint`, `is_main` — see ddptrain.api and examples/.
"""

from .version import __version__

API = (
    "setup",
    "cleanup",
    "rank",
    "world_size",
    "is_main",
    "prepare_model",
    "load_data",
    "unwrap",
    "train_loader",
    "eval_loader",
    "reduce_sum",
    "save_checkpoint",
    "load_checkpoint",
    "EpochLoader",
)
FIT = ("fit", "FitResult", "Preempted", "DdptrainError")
__all__ = ["__version__", *API, *FIT]


def __getattr__(name: str):
    # Loaded on first use, so `import ddptrain` (and the CLI's start-up) stays free of torch.
    if name in API:
        from . import api

        return getattr(api, name)
    if name in FIT:
        from . import fitting

        return getattr(fitting, name)
    raise AttributeError(f"module 'ddptrain' has no attribute '{name}'")
