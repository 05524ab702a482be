"""Objects handed to `ddptrain.fit` in this process — a model (a factory or a module) and datasets — under the names
a run records for them (`object://NAME`, `dataset://NAME`). The process that calls `fit` and every rank it starts
hold the same objects; anything else (the command line) has none and says where such a name came from."""

from __future__ import annotations

from typing import Any, Dict, Optional

OBJECT_PREFIX = "object://"
DATASET_PREFIX = "dataset://"
_handed: Dict[str, Any] = {}


def hand(name: str, value: Any) -> None:
    _handed[name] = value


def lookup(name: str) -> Optional[Any]:
    return _handed.get(name)


def items() -> Dict[str, Any]:
    return dict(_handed)


def absent(name: str) -> str:
    """Why a name of an object handed to `ddptrain.fit` means nothing here, and what to do."""
    what = "dataset" if name.startswith(DATASET_PREFIX) else "model"
    return (
        f"{name} is a {what} that was handed to ddptrain.fit as a Python object; it exists only inside that call. "
        + (
            "Load the run's weights into your own model: model.load_state_dict(ddptrain.load_checkpoint(PATH)"
            "['model']), or train with a factory (ddptrain.fit(model=build, ...) or --model file.py:build) so the "
            "command line can rebuild it"
            if what == "model"
            else "Evaluate from Python, or give the command line data it can read (--data FOLDER, a manifest, ...)"
        )
    )
