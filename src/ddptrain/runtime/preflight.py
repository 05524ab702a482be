"""Before the first step, every rank must agree on what it is about to train.

Ranks that disagree (another class list on one node, a stale copy of the data, another library
version, other flags) would otherwise hang in their first all-reduce or silently train different
things. One all_gather of a few facts turns that into an error naming the ranks and the field.
The facts themselves are gathered by the caller (the trainer knows its data and model).
"""

from __future__ import annotations

import hashlib
from typing import Any, Dict, Iterable, List

import torch.distributed as dist
from torch import nn

from ..errors import RanksDisagreeError
from ..util import ranks_named


def digest(items: Iterable) -> str:
    return hashlib.sha1("\n".join(map(str, items)).encode()).hexdigest()[:12]


def weights_checksum(model: nn.Module) -> str:
    return digest(
        f"{name}:{value.double().sum().item():.6e}"
        for name, value in model.state_dict().items()
        if value.is_floating_point()
    )


def disagreements(gathered: List[Dict[str, Any]]) -> List[str]:
    problems = []
    reference = gathered[0]
    for key, expected in reference.items():
        others = [rank for rank, facts in enumerate(gathered) if facts.get(key) != expected]
        if others:
            shown = _show(gathered[others[0]].get(key), expected)
            problems.append(
                f"{key}: rank 0 has {shown[1]}, {ranks_named(others)} {'has' if len(others) == 1 else 'have'} {shown[0]}"
            )
    return problems


def _show(value, expected):
    if isinstance(value, dict) and isinstance(expected, dict):
        keys = sorted(k for k in set(value) | set(expected) if value.get(k) != expected.get(k))
        return ({k: value.get(k) for k in keys}, {k: expected.get(k) for k in keys})
    return value, expected


def check_agreement(facts: Dict[str, Any], rank: int, world_size: int) -> None:
    """Every rank calls this; all of them raise the same error when any two differ."""
    if world_size == 1:
        return
    gathered: List[Any] = [None] * world_size
    dist.all_gather_object(gathered, facts)
    problems = disagreements(gathered)
    if problems:
        raise RanksDisagreeError(
            f"ranks disagree before the first step: {'; '.join(problems)}. "
            "Every node must see the same data, flags and library versions.",
            rank=rank,
        )
