"""`ddptrain demo` (what `make demo` runs): generate, train on 2 processes, evaluate, predict, report."""

import pytest

from ..conftest import run_cli


@pytest.mark.slow
def test_demo_runs_end_to_end_and_draws_the_report(tmp_path):
    out = tmp_path / "run"
    proc = run_cli(["demo", "--data", tmp_path / "data", "--out", out, "--epochs", 1, "--device", "cpu"])
    assert "== ddptrain demo summary" in proc.stdout
    assert "val top-1" in proc.stdout and "predictions (validation images):" in proc.stdout
    assert "top-5" not in proc.stdout  # 5 classes: five guesses always hold the right one
    held_out = {line.split("\t")[0] for line in (out / "splits" / "val.txt").read_text().splitlines()[1:]}
    section = proc.stdout.split("predictions (validation images):")[1].split("report:")[0]
    predicted = [line.split()[0] for line in section.splitlines() if line.strip()]
    assert len(predicted) == 5 and set(predicted) <= held_out  # never images it trained on
    assert not any(line.startswith("{") for line in proc.stdout.splitlines())  # a summary, not raw JSON
    assert (out / "checkpoints" / "best.pt").is_file() and (out / "best_eval.json").is_file()
    for name in ("report.html", "report.md", "curves.png", "throughput.png", "epoch_time.png", "confusion.png"):
        assert (out / "report" / name).is_file(), name
    assert f"report: {out / 'report' / 'report.html'} (open it in a browser" in proc.stdout
