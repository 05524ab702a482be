"""`ddptrain bench`: the input benchmark's JSON contract and saved chart; the dp-vs-ddp script says why it is skipped."""

import argparse
import json
from pathlib import Path

import pytest

from ddptrain.data.images import region_decoder
from ddptrain.tools.bench import add_arguments, run_bench

from ..conftest import run_cli


@pytest.mark.slow
def test_input_bench_prints_the_contract_json_and_saves_a_chart(tmp_path):
    marked = region_decoder() is not None  # restart markers need ddptrain's compiled decoder
    flags = ["--count", 8, "--rounds", 1, "--worker-counts", 1, "--max-side", 256, *(["--restart-markers"] * marked)]
    proc = run_cli(["bench", "input", *flags, "--json", "--out", tmp_path])
    result = json.loads(proc.stdout)
    seed, ours = result["seed_images_per_sec_per_core"], result["ddptrain_images_per_sec_per_core"]
    assert seed > 0 and ours > 0 and abs(result["ratio"] - ours / seed) < 1e-9
    # the limit: decoding the same files alone, side by side, per core and through workers; the stages' split
    decode = result["decode_only_images_per_sec_per_core"]
    assert (
        decode > 0 and abs(result["fraction_of_decode_only"] - result["loader_images_per_sec_per_core"] / decode) < 1e-9
    )
    assert set(result["stages_us_per_image"]["reduced"]) >= {"read", "decode", "crop + resize + flip", "collate"}
    assert result["stages_us_per_image"]["full"]["decode"] > 0
    assert [row["workers"] for row in result["workers"]] == [1] and result["workers"][0]["decode_only"] > 0
    assert result["presized"] == {"max_side": 256, "quality": 90} and result["presized_fraction_of_decode_only"] > 0
    if marked:  # every pipeline ran on the rewritten copies; the files as given decoded beside them
        given = result["decode_only_original_images_per_sec_per_core"]
        assert (
            result["restart_markers"]
            and abs(result["fraction_of_original_decode_only"] * given - result["loader_images_per_sec_per_core"])
            < 1e-6 * given
        )
        assert result["workers"][0]["fraction_of_original_decode_only"] > 0
        assert (
            "decode only, the files as given" in run_cli(["bench", "input", *flags, "--out", tmp_path / "text"]).stdout
        )
    assert json.loads((tmp_path / "input.json").read_text())["ratio"] == result["ratio"]
    assert (tmp_path / "input.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_dp_vs_ddp_script_without_two_gpus_says_why(tmp_path):
    """nn.DataParallel is measured by a script of the repository (never part of the package)."""
    import subprocess
    import sys

    import torch

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "dp_vs_ddp.py"
    out = subprocess.run([sys.executable, str(script), "--out", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    if torch.cuda.device_count() < 2:
        assert out.stdout.startswith("skipped: needs at least 2 GPUs")


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
        "model",
        "data",
        "preflight",
        "resume and DDP",
        "first step",
    ]
    assert all(seconds >= 0 for seconds in phases.values())
    assert sum(phases.values()) == pytest.approx(result["first_step_s"], abs=0.01)  # the phases cover it all
    assert 0 < result["first_step_s"] < result["whole_command_s"]
    assert (tmp_path / "startup.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_recipe_bench_trains_the_strong_recipe_and_summarises_it(tmp_path):
    """One real run of the strong recipe (what each of the bench's five runs is); the plan around it below."""
    from ddptrain.tools.bench import recipe
    from ddptrain.tools.demodata import make_dataset

    data = make_dataset(tmp_path / "data", classes=3, per_class=6, seed=0, progress=False)
    work = recipe.RecipeWork(data, "timm:test_resnet", 32, 4, 2, 0, 1, "cpu")
    records = recipe.train(work, data, tmp_path / "run", recipe.STRONG, None)
    row = recipe.summary("strong", "scratch", records)
    assert len(row["curve"]) == len(row["curve_ema"]) == 2  # the EMA evaluated each epoch next to the model
    assert 0 <= row["final val_top1"] <= 1 and row["train s/epoch"] > 0 and row["s/epoch with eval"] > 0
    saved = (tmp_path / "run" / "config.yaml").read_text()
    assert "mixup: 0.8" in saved and "auto_augment: randaugment" in saved


def test_recipe_bench_compares_basic_and_strong_from_scratch_and_pretrained(tmp_path, monkeypatch, capsys):
    from ddptrain.tools.bench import recipe

    runs = []

    def fake_train(work, data, out, settings, weights):
        runs.append((data.name, out.name, "mixup" in settings, weights))
        strong = "ema-decay" in settings
        return [
            {"val_top1": 0.5 + 0.1 * epoch, "epoch_time_s": 2.0 if strong else 1.0, "time": 10.0 * epoch}
            | ({"val_top1_ema": 0.4} if strong else {})
            for epoch in range(3)
        ]

    monkeypatch.setattr(recipe, "train", fake_train)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = ["recipe", "--epochs", 3, "--per-class", 2, "--device", "cpu", "--json", "--out", tmp_path]
    assert run_bench(parser.parse_args(list(map(str, args)))) == 0
    assert runs[0][:3] == ("source", "pretrain", False)  # first the pretrained file, basic recipe, other data
    assert [(out, strong) for _, out, strong, _ in runs[1:]] == [
        ("basic-scratch", False),
        ("strong-scratch", True),
        ("basic-pretrained", False),
        ("strong-pretrained", True),
    ]
    assert [weights is None for *_, weights in runs[1:]] == [True, True, False, False]
    assert all(str(w).endswith("pretrain/checkpoints/best.pt") for *_, w in runs[3:])
    result = json.loads(capsys.readouterr().out)
    assert result["strong_over_basic_train_time_scratch"] == 2.0
    assert {row["final val_top1 EMA"] for row in result["rows"]} == {"", 0.4}
    assert (tmp_path / "recipe.png").stat().st_size > 0 and (tmp_path / "recipe.json").is_file()


def test_store_bench_measures_old_flat_out_and_new_heartbeat_traffic(tmp_path):
    """8 simulated ranks for half a second per pattern: a real TCPStore server, one client process."""
    proc = run_cli(
        ["bench", "store", "--ranks", 8, "--seconds", 0.5, "--clients", 1, "--json", "--out", tmp_path], timeout=120
    )
    result = json.loads(proc.stdout)
    rows = {row["pattern"]: row for row in result["rows"]}
    assert list(rows) == ["old", "flat-out", "new"] and {row["ranks"] for row in result["rows"]} == {8}
    assert rows["old"]["offered writes/s"] == 2 * 8 * 10 and rows["new"]["offered writes/s"] == 8 / 1.0
    assert rows["old"]["achieved writes/s"] == pytest.approx(160, rel=0.5)  # paced: what was offered
    assert rows["new"]["achieved writes/s"] <= 3 * 8  # ranks / interval, give or take the window's edges
    assert result["ceiling_writes_per_s"] == rows["flat-out"]["achieved writes/s"] > rows["old"]["achieved writes/s"]
    for row in result["rows"]:
        assert row["set p99 us"] >= row["set p50 us"] > 0 and row["probe p99 ms"] >= row["probe p50 ms"] > 0
    projected = {(row["ranks"], row["design"][:3]): row["writes/s"] for row in result["projection"]}
    assert projected == {(1000, "old"): 20_000, (1000, "new"): 200, (10_000, "old"): 200_000, (10_000, "new"): 2_000}
    assert json.loads((tmp_path / "store.json").read_text())["rows"] == result["rows"]
    assert (tmp_path / "store.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_startup_files_bench_reports_first_step_and_every_processs_memory(tmp_path):
    """A folder of 400 files: a real 2-process run, memory read from /proc for the ranks and their workers."""
    proc = run_cli(
        ["bench", "startup", "--files", 400, "--copy-sizes", 20000, "--settle", 0, "--workers", 1, "--json"]
        + ["--out", tmp_path],
        timeout=180,
    )
    result = json.loads(proc.stdout)
    measured = result["sizes"]["400"]
    assert measured["first_step_s"] > 0 and "data" in measured["phases"]
    first = measured["memory_at_first_step"]
    # per rank one training loader worker and one evaluation worker (forked at set-up, before the run's threads)
    assert first["rank"]["count"] == 2 and first["worker"]["count"] == 4
    assert 0 < first["worker"]["max_uss_mb"] <= first["worker"]["max_pss_mb"] <= first["worker"]["max_rss_mb"]
    copy = result["worker_copy"]
    assert set(copy) == {"400", "20000"}
    assert copy["20000"]["tuples_worker_uss_mb"] > copy["20000"]["arrays_worker_uss_mb"] > 0
    assert (tmp_path / "startup-files.json").is_file()


def test_shard_input_bench_reads_the_same_images_from_files_local_and_http_shards(tmp_path):
    proc = run_cli(
        ["bench", "input", "--shards", "--count", 64, "--img-size", 32, "--rounds", 1, "--workers", 0, "--json"]
        + ["--out", tmp_path],
        timeout=120,
    )
    result = json.loads(proc.stdout)
    assert [row["source"] for row in result["rows"]] == ["folder of files", "shards, local", "shards, HTTP"]
    assert result["images"] == 64 and all(
        row["images/s"] > 0 and row["read only, images/s"] > 0 for row in result["rows"]
    )
    assert (tmp_path / "input-shards.png").read_bytes()[:4] == b"\x89PNG"
