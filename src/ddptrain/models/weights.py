"""Weights from a file into a model: `read_model_weights` reads --weights (a state dict, a safetensors file, a
ddptrain checkpoint or another script's) as tensors only; `load_weights` fits them — wrapper prefixes stripped, a
head that does not fit re-initialised, any other difference listed."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, Iterable, List

import torch
from torch import nn

from ..errors import WeightsError, missing_weights_file
from ..util import PLAIN_DATA_GLOBALS, load_refusal

log = logging.getLogger("ddptrain")

STRIP_PREFIXES = ("module.", "_orig_mod.")  # added by DistributedDataParallel and torch.compile
# Where other training scripts keep the model inside their checkpoints (besides ddptrain's own `model`).
FOREIGN_MODEL_KEYS = ("state_dict", "model_state_dict")


def strip_prefixes(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    cleaned = {}
    for key, value in state.items():
        changed = True
        while changed:
            changed = False
            for prefix in STRIP_PREFIXES:
                if key.startswith(prefix):
                    key, changed = key[len(prefix) :], True
        cleaned[key] = value
    return cleaned


def load_weights(model: nn.Module, state: Dict[str, torch.Tensor], head: str, source: str) -> List[str]:
    """Load `state` (read from `source`) into `model`. A head that does not fit is left freshly initialised
    and returned; any other missing, unexpected or mis-shaped key is an error listing the keys."""
    own = model.state_dict()
    state = without_holder_prefix(strip_prefixes(state), own, source)
    head_keys = {k for k in own if k.startswith(head + ".")}
    reinit_head = sorted(k for k in head_keys if k not in state or state[k].shape != own[k].shape)
    problems = describe_mismatch(state, own, head_keys)
    if problems:
        raise WeightsError(
            f"weights in {source} do not fit the model ({problems}); "
            "check --model matches the architecture the weights were trained with"
        )
    usable = {k: v for k, v in state.items() if k not in reinit_head}
    model.load_state_dict(usable, strict=False)
    if reinit_head:
        log.info(
            "weights %s: classifier head %s re-initialised (its shape does not fit %s)",
            source,
            ", ".join(reinit_head),
            tuple(own[reinit_head[0]].shape),
        )
    return reinit_head


def without_holder_prefix(state: Dict[str, torch.Tensor], own: Dict[str, Any], source: str) -> Dict[str, torch.Tensor]:
    """Weights saved from a module that holds the model as an attribute (a LightningModule's `self.model`, a
    wrapper's `self.net`): every key starts with the same `NAME.` and none is one of the model's own; read without
    that prefix, when what is left names the model's keys."""
    if not state or any(key in own for key in state) or not all("." in key for key in state):
        return state
    holders = {key.split(".", 1)[0] for key in state}
    if len(holders) != 1:
        return state
    prefix = holders.pop() + "."
    stripped = {key[len(prefix) :]: value for key, value in state.items()}
    if not any(key in own for key in stripped):
        return state
    log.info("weights %s: keys read without their prefix %r (the model held as an attribute)", source, prefix)
    return stripped


def describe_mismatch(state: Dict[str, torch.Tensor], own: Dict[str, torch.Tensor], allowed: Iterable[str] = ()) -> str:
    """'' when `state` fits `own` (keys in `allowed` may differ); otherwise the offending keys by kind."""
    allowed = set(allowed)
    mismatched = sorted(k for k in state if k in own and k not in allowed and state[k].shape != own[k].shape)
    unexpected = sorted(k for k in state if k not in own)
    # Old checkpoints may lack BatchNorm's step counter; it carries no learned value.
    missing = sorted(k for k in own if k not in state and k not in allowed and not k.endswith("num_batches_tracked"))
    return "; ".join(
        f"{label}: {', '.join(keys[:8])}{' ...' if len(keys) > 8 else ''}"
        for label, keys in (("shape mismatch", mismatched), ("unexpected", unexpected), ("missing", missing))
        if keys
    )


def read_model_weights(path: str | Path) -> Dict[str, torch.Tensor]:
    """A model state dict from a bare state-dict file, a .safetensors file, a ddptrain checkpoint or another
    script's checkpoint (`state_dict` / `model_state_dict` inside). Tensors only: pickled code is refused."""
    path = Path(path)
    if not path.is_file():
        raise missing_weights_file(path)
    loaded: Any
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            loaded = load_file(str(path), device="cpu")
        else:
            with torch.serialization.safe_globals(PLAIN_DATA_GLOBALS):
                loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise WeightsError(
            f"cannot read weights from {path}: {load_refusal(error)}. Only tensors, plain values and "
            ".safetensors are read (weights_only=True: no pickled code runs); save the model's state_dict alone "
            "(torch.save(model.state_dict(), PATH)) to start from it"
        ) from None
    for key in ("model", *FOREIGN_MODEL_KEYS):
        if isinstance(loaded, dict) and isinstance(loaded.get(key), dict):
            loaded = loaded[key]
            break
    if not isinstance(loaded, dict) or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
        raise WeightsError(f"{path} does not hold a state dict of tensors")
    return strip_prefixes(loaded)
