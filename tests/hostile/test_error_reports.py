"""A worker that dies while writing its error report (killed mid-write, a full disk): torchrun's agent cannot parse
the half-written file. The launcher says so in one line naming the node, never a JSON traceback."""

from __future__ import annotations

import textwrap

from ..conftest import run_cli

TORN_REPORT = textwrap.dedent(
    """
    import os

    from torch import nn


    def build(num_classes):
        with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as handle:
            handle.write('{"message": {"mess')  # the report cut short, then the process gone
        os._exit(1)
    """
)


def test_a_half_written_error_report_is_one_line_not_a_traceback(tiny_shapes, tmp_path):
    (tmp_path / "torn.py").write_text(TORN_REPORT)
    common = ["--img-size", 32, "--batch-size", 4, "--epochs", 1, "--workers", 0, "--nproc", 2]
    failed = run_cli(
        [
            "train",
            "--data",
            tiny_shapes,
            "--out",
            tmp_path / "run",
            "--model",
            f"{tmp_path / 'torn.py'}:build",
            *common,
        ],
        check=False,
    )
    assert failed.returncode != 0
    assert "Traceback" not in failed.stderr and "JSONDecodeError" not in failed.stderr, failed.stderr[-3000:]
    said = [line for line in failed.stderr.splitlines() if "could not read its error report" in line]
    assert len(said) == 1 and "a worker on node 0 failed" in said[0], failed.stderr[-3000:]
