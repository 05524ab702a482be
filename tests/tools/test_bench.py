"""`ddptrain bench`: the input benchmark's JSON contract and saved chart; dp-vs-ddp says why it is skipped."""

import argparse
import json

import pytest

from ddptrain.tools.bench import add_arguments, run_bench

from ..conftest import run_cli


@pytest.mark.slow
def test_input_bench_prints_the_contract_json_and_saves_a_chart(tmp_path):
    proc = run_cli(["bench", "input", "--count", 8, "--rounds", 1, "--json", "--out", tmp_path])
    result = json.loads(proc.stdout)
    seed, ours = result["seed_images_per_sec_per_core"], result["ddptrain_images_per_sec_per_core"]
    assert seed > 0 and ours > 0 and abs(result["ratio"] - ours / seed) < 1e-9
    assert json.loads((tmp_path / "input.json").read_text())["ratio"] == result["ratio"]
    assert (tmp_path / "input.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_dp_vs_ddp_without_two_gpus_says_why(capsys, tmp_path):
    import torch

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert run_bench(parser.parse_args(["dp-vs-ddp", "--out", str(tmp_path)])) == 0
    out = capsys.readouterr().out
    if torch.cuda.device_count() < 2:
        assert out.startswith("skipped: dp-vs-ddp needs at least 2 GPUs")


@pytest.mark.slow
def test_startup_bench_breaks_the_time_to_the_first_step_into_phases(tmp_path):
    proc = run_cli(["bench", "startup", "--rounds", 1, "--json", "--device", "cpu", "--out", tmp_path])
    result = json.loads(proc.stdout)
    phases = {row["phase"]: row["seconds"] for row in result["rows"][:-1]}
    assert list(phases) == [
        "launcher",
        "worker start",
        "imports",
        "process group",
        "data",
        "model",
        "preflight",
        "resume and DDP",
        "first step",
    ]
    assert all(seconds >= 0 for seconds in phases.values())
    assert sum(phases.values()) == pytest.approx(result["first_step_s"], abs=0.01)  # the phases cover it all
    assert 0 < result["first_step_s"] < result["whole_command_s"]
    assert (tmp_path / "startup.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
