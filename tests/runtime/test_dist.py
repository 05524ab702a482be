"""runtime/dist.py on two real gloo processes: what rank 0 computes for everyone, and how its failures reach the
other ranks instead of leaving them waiting."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import List

import pytest

from ddptrain.errors import DataError, DdptrainError
from ddptrain.runtime import dist

from ..dist_harness import run_ranks


def _listing(calls: Path) -> List[str]:
    with calls.open("a") as out:
        out.write("listed\n")
    return ["ants/1.jpg", "bees/2.jpg"]


def _refused() -> List[str]:
    raise DataError("--data /nowhere: no such folder; check the path")


def _broken() -> List[str]:
    raise OSError(5, "Input/output error", "/mnt/nfs/ants")


def _outcome(rt, compute) -> list:
    try:
        return ["value", dist.computed_on_main(rt, compute, "while listing the data")]
    except DdptrainError as error:
        return [type(error).__name__, str(error), error.rank, error.every_rank]
    except OSError as error:
        return [type(error).__name__, str(error)]


def _three_cases(rt, calls: str) -> list:
    return [_outcome(rt, partial(_listing, Path(calls))), _outcome(rt, _refused), _outcome(rt, _broken)]


@pytest.mark.slow
def test_rank_0_computes_once_for_every_rank_and_its_failures_reach_every_rank(tmp_path):
    calls = tmp_path / "calls.txt"
    rank0, rank1 = run_ranks(_three_cases, 2, str(calls))

    # one listing, on rank 0; both ranks hold its result
    assert calls.read_text() == "listed\n"
    assert rank0[0] == rank1[0] == ["value", ["ants/1.jpg", "bees/2.jpg"]]

    # ddptrain's own error: the same kind and message on rank 1, which says it is raised alike everywhere
    assert rank0[1][:2] == ["DataError", "--data /nowhere: no such folder; check the path"]
    assert rank1[1] == ["DataError", "--data /nowhere: no such folder; check the path", 1, True]

    # anything else: rank 0 raises it as it was; rank 1 gets one line naming rank 0 and what it was doing
    assert rank0[2] == ["OSError", "[Errno 5] Input/output error: '/mnt/nfs/ants'"]
    assert rank1[2] == [
        "DdptrainError",
        "rank 0 failed while listing the data: OSError: [Errno 5] Input/output error: '/mnt/nfs/ants'",
        1,
        True,
    ]
