"""A worker's error report reaches torchrun's agent whole: the JSON its own reader parses, renamed into place."""

from __future__ import annotations

import os

import pytest
from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

from ddptrain.runtime.errorfile import recorded


def _fails():
    raise ValueError("rank 1: the batch is empty")


def test_the_report_is_the_one_torchruns_agent_reads_and_no_part_file_stays(tmp_path, monkeypatch):
    report = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(report))
    with pytest.raises(ValueError):
        recorded(_fails)()
    failure = ProcessFailure(local_rank=1, pid=os.getpid(), exitcode=1, error_file=str(report))
    assert failure.message["message"] == "ValueError: rank 1: the batch is empty"
    assert "_fails" in failure.message["extraInfo"]["py_callstack"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["error.json"]


def test_a_report_that_cannot_be_written_leaves_nothing_and_the_error_stands(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path / "gone" / "error.json"))
    with pytest.raises(ValueError, match="batch is empty"):
        recorded(_fails)()
    assert list(tmp_path.iterdir()) == []
