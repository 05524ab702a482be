"""The run directory is never overwritten silently, and never shared by two jobs at once."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time

import pytest
import yaml

from ..conftest import (
    CLI_TIMEOUT_S,
    TINY,
    _kill_group,
    cli_env,
    fault_env,
    json_lines,
    load_checkpoint,
    read_metrics,
    run_cli,
    started,
    write_synthetic,
)


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def one_epoch(tiny_shapes, tmp_path_factory):
    """A finished 1-epoch run on 2 processes with the default recipe (kept pristine; tests use copies of it)."""
    run_dir = tmp_path_factory.mktemp("one_epoch") / "run"
    run_cli(["train", "--data", tiny_shapes, "--out", run_dir, *TINY, "--epochs", 1, "--nproc", 2])
    return run_dir


def _copy(run_dir, tmp_path):
    return shutil.copytree(run_dir, tmp_path / "run")


def test_a_resumed_run_whose_workers_fail_is_not_told_to_add_the_resume_it_has(one_epoch, tmp_path):
    """A worker failure in a run with a checkpoint ended on "add --resume auto", also for a command that had it."""
    run_dir = _copy(one_epoch, tmp_path)
    more = write_synthetic(tmp_path / "more", classes=4, per_class=3)  # a class the run's split does not know
    failed = run_cli(
        ["train", "--data", more, "--out", run_dir, *TINY, "--nproc", 2, "--epochs", 2, "--resume", "auto"],
        check=False,
    )
    assert failed.returncode != 0 and "that the run's split" in failed.stderr, failed.stderr[-3000:]
    assert "fix it and rerun." in failed.stderr and "add --resume auto" not in failed.stderr


def test_a_run_given_relative_paths_is_repeated_and_reported_from_another_folder(tmp_path):
    """config.yaml kept `data: data` as typed: `--config RUN_DIR/config.yaml` run from another folder trained on that
    folder's own `data`, and `report` said the run's data folder was not on this machine."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    write_synthetic(project / "data", classes=2, per_class=6)
    write_synthetic(elsewhere / "data", classes=2, per_class=6, start=50)  # another folder of the same name
    run_cli(["train", "--data", "data", "--out", "runs/a", *TINY, "--epochs", 1, "--nproc", 1], cwd=project)
    run_dir = project / "runs" / "a"
    recorded = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert (recorded["data"], recorded["out"]) == (str(project / "data"), str(run_dir))
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["config"]["data"] == str(project / "data")

    run_cli(["train", "--config", run_dir / "config.yaml", "--out", "b"], cwd=elsewhere)
    assert (elsewhere / "b" / "splits" / "val.txt").read_text() == (run_dir / "splits" / "val.txt").read_text()
    run_cli(["report", run_dir, "--out", "report"], cwd=elsewhere)
    page = (elsewhere / "report" / "report.html").read_text()
    assert "no thumbnails" not in page and "not on this machine" not in page


def test_a_second_run_into_the_same_out_is_refused_and_overwrite_starts_clean(tiny_shapes, one_epoch, tmp_path):
    run_dir = _copy(one_epoch, tmp_path)
    metrics, last = (run_dir / "metrics.jsonl").read_text(), _digest(run_dir / "checkpoints" / "last.pt")

    again = run_cli(["train", "--data", tiny_shapes, "--out", run_dir, *TINY, "--epochs", 1, "--nproc", 2], check=False)
    assert again.returncode == 2
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and "already holds a run (1 epoch in metrics.jsonl, checkpoints" in lines[0]
    assert "--resume auto" in lines[0] and "--overwrite" in lines[0]
    assert (run_dir / "metrics.jsonl").read_text() == metrics and _digest(run_dir / "checkpoints" / "last.pt") == last

    fresh = run_cli(
        ["train", "--data", tiny_shapes, "--out", run_dir, *TINY, "--epochs", 2, "--nproc", 2, "--overwrite"]
    )
    assert "--overwrite: removed the earlier run's checkpoints, metrics.jsonl" in fresh.stderr
    assert [m["epoch"] for m in read_metrics(run_dir)] == [0, 1]  # the new run's epochs only
    assert len(list((run_dir / "tb").glob("events.out.tfevents.*"))) == 1  # no second event file mixed in


def test_two_jobs_cannot_share_a_run_dir_and_a_killed_job_leaves_no_stale_lock(tiny_shapes, tmp_path):
    run_dir = tmp_path / "run"
    first = [
        sys.executable,
        "-m",
        "ddptrain",
        "train",
        "--data",
        tiny_shapes,
        "--out",
        run_dir,
        *TINY,
        "--epochs",
        50,
        "--nproc",
        2,
        "--resume",
        "auto",
    ]
    with started(first, env=cli_env(fault_env("slow_data:0.2", rank="all"))) as job:
        lock = run_dir / ".ddptrain.lock"
        deadline = time.monotonic() + CLI_TIMEOUT_S
        while not (lock.is_file() and lock.read_text().strip()) and job.poll() is None:
            assert time.monotonic() < deadline, "the first job never took the lock"
            time.sleep(0.2)
        holder = json.loads(lock.read_text())
        second = run_cli(
            ["train", "--data", tiny_shapes, "--out", run_dir, *TINY, "--epochs", 1, "--nproc", 2, "--resume", "auto"],
            check=False,
        )
        assert second.returncode == 2
        assert f"is in use by another job (host {holder['host']}, pid {holder['pid']}" in second.stderr
        _kill_group(job)  # SIGKILL, the whole tree: nothing gets to clean up
    run_cli(["train", "--data", tiny_shapes, "--out", run_dir, *TINY, "--epochs", 1, "--resume", "auto"])
    assert (run_dir / "checkpoints" / "last.pt").is_file()


def test_resume_auto_continues_from_the_newest_checkpoint_that_loads(tiny_shapes, tmp_path):
    run_dir = tmp_path / "run"
    flags = ["--data", tiny_shapes, "--out", run_dir, *TINY, "--nproc", 2, "--save-every-steps", 2, "--resume", "auto"]
    run_cli(["train", *flags, "--epochs", 2])
    last = run_dir / "checkpoints" / "last.pt"
    last.write_bytes(
        last.read_bytes()[: last.stat().st_size // 2]
    )  # a copy cut short, a full disk on a non-POSIX store
    steps = sorted((run_dir / "checkpoints").glob("step-*.pt"))
    resumed = run_cli(["train", *flags, "--epochs", 3])
    assert (
        f"refused last.pt: not a zip archive (truncated, or not a PyTorch checkpoint); continuing from {steps[-1].name}"
        in resumed.stderr
    )
    assert resumed.stderr.count("refused last.pt") == 1  # every rank reads the files; one says so
    assert [m["epoch"] for m in read_metrics(run_dir)] == [0, 1, 2]  # each epoch once, the interrupted one redone


def test_a_metrics_line_cut_short_by_a_crash_does_not_stop_the_resume(tiny_shapes, one_epoch, tmp_path):
    run_dir = _copy(one_epoch, tmp_path)
    flags = ["--data", tiny_shapes, "--out", run_dir, *TINY, "--nproc", 2, "--resume", "auto"]
    metrics = run_dir / "metrics.jsonl"
    whole = metrics.read_text()
    metrics.write_text(whole + '{"epoch": 1, "train_loss": 0.9')  # the crash came in the middle of an append
    resumed = run_cli(["train", *flags, "--epochs", 2])
    assert "dropped an unreadable last line (a write cut short by a crash)" in resumed.stderr
    assert [m["epoch"] for m in read_metrics(run_dir)] == [0, 1]
    metrics.write_text('{"epoch": 0, "trai\n' + metrics.read_text())  # damage in the middle is not a crash's doing
    refused = run_cli(["train", *flags, "--epochs", 3], check=False)
    assert refused.returncode != 0 and "metrics.jsonl:1 is not a metrics line" in refused.stderr


def test_weights_that_turn_nan_are_never_checkpointed(tiny_shapes, tmp_path):
    """Weights go NaN in epoch 2's last step (6 steps per epoch here) while that step's loss was finite: every rank
    stops with the error, nothing of epoch 2 is written, and epoch 1's checkpoint stays the resume point."""
    run_dir = tmp_path / "run"
    proc = run_cli(
        ["train", "--data", tiny_shapes, "--out", run_dir, *TINY, "--epochs", 3, "--nproc", 2],
        check=False,
        env_extra=fault_env("nan_weights", rank="all", step=12),
    )
    assert proc.returncode != 0
    assert proc.stderr.count("became non-finite in epoch 2; no checkpoint written") == 1, proc.stderr[-3000:]
    assert [m["epoch"] for m in read_metrics(run_dir)] == [0]
    last = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert last["epoch"] == 0 and all(v.isfinite().all() for v in last["model"].values() if v.is_floating_point())


def test_on_resume_the_command_lines_optimizer_settings_win(tiny_shapes, one_epoch, tmp_path):
    run_dir = _copy(one_epoch, tmp_path)  # adamw, weight decay 0.05: the defaults
    flags = ["--data", tiny_shapes, "--out", run_dir, *TINY, "--nproc", 2, "--resume", "auto"]
    changed = run_cli(["train", *flags, "--epochs", 2, "--weight-decay", 5e-4])
    assert "optimizer settings replace the checkpoint's: weight_decay 0.05 -> 0.0005" in changed.stderr
    groups = load_checkpoint(run_dir / "checkpoints" / "last.pt")["optimizer"]["param_groups"]
    assert [g["weight_decay"] for g in groups] == [5e-4, 0.0]  # not the old 0.05
    switched = run_cli(["train", *flags, "--epochs", 3, "--optimizer", "sgd", "--lr", 0.01, "--momentum", 0.8])
    assert (
        "--optimizer sgd replaces the checkpoint's adamw; its state (momentum, moments) starts fresh" in switched.stderr
    )
    assert switched.stderr.count("--optimizer sgd replaces") == 1
    saved = load_checkpoint(run_dir / "checkpoints" / "last.pt")["optimizer"]
    assert all("momentum_buffer" in entry for entry in saved["state"].values())  # SGD's own state, not AdamW's
    assert [g["momentum"] for g in saved["param_groups"]] == [0.8, 0.8]
    assert [m["epoch"] for m in read_metrics(run_dir)] == [0, 1, 2]


def test_the_runs_split_is_the_source_of_truth_once_written(tmp_path):
    """Images added to the folder would reshuffle a recomputed split and put former training images into validation;
    resume and eval --split val read the run's own split back instead."""
    data = write_synthetic(tmp_path / "data", classes=3, per_class=12)
    run_dir = tmp_path / "run"
    flags = ["--data", data, "--out", run_dir, *TINY, "--nproc", 2, "--resume", "auto"]
    run_cli(["train", *flags, "--epochs", 1])
    val_before = (run_dir / "splits" / "val.txt").read_text()
    write_synthetic(data, classes=3, per_class=4, start=100)  # 12 new images, 4 per class
    best = run_dir / "checkpoints" / "best.pt"
    evaluated = run_cli(["eval", "--checkpoint", best, "--data", data, "--nproc", 2])
    assert json_lines(evaluated.stdout)[0]["samples"] == val_before.count("\n") - 1 == 9  # less the format line
    assert evaluated.stderr.count("12 images added to") == 1 and "left out of --split val" in evaluated.stderr
    resumed = run_cli(["train", *flags, "--epochs", 2, "--val-split", 0.5])  # a later flag wins over TINY's 0.25
    assert "resume: train/val split read back" in resumed.stderr and "12 images added to" in resumed.stderr
    assert (run_dir / "splits" / "val.txt").read_text() == val_before
    assert (
        resumed.stderr.count(  # what config.yaml records is the split's own --val-split, not the one moving none
            "the split trained on was made with --val-split 0.25 (this run's own, read back); this command's 0.5 moves "
            "no image and the run records 0.25"
        )
        == 1
    )
    assert "val_split: 0.25\n" in (run_dir / "config.yaml").read_text()
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["config"]["val_split"] == 0.25
    assert [m["val_samples"] for m in read_metrics(run_dir)] == [9, 9]
    gone = data / val_before.splitlines()[1].split("\t")[0]
    gone.unlink()
    refused = run_cli(["train", *flags, "--epochs", 3], check=False)
    assert (
        refused.returncode != 0
        and f"1 image of the run's split ({run_dir / 'splits'}) is gone from {data}: {gone}; give --data the run's own folder"
        in refused.stderr
    )


def test_eval_in_the_run_dir_on_another_folder_names_the_folder_the_run_trained_on(tiny_shapes, one_epoch, tmp_path):
    """A checkpoint beside its run's splits/, evaluated on a folder of other images: --split val needs the run's
    folder, said as such (not "36 images are gone ... put them back"); --split all scores the other folder."""
    other = write_synthetic(tmp_path / "other", classes=3, per_class=4, start=100)
    best = one_epoch / "checkpoints" / "best.pt"
    refused = run_cli(["eval", "--checkpoint", best, "--data", other, "--nproc", 2], check=False)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert refused.stderr.count("none of the 36 images") == 1  # rank 0 listed the data and said it, once
    assert (
        f"none of the 36 images of the run's split ({one_epoch / 'splits'}) is in {other}: it is not the folder the "
        f"run was trained on; --split val scores the run's validation images, which need the folder it trained on "
        f"({tiny_shapes}) or a copy of it; --split all scores every image in {other}"
    ) in refused.stderr, refused.stderr
    assert "put them back" not in refused.stderr
    scored = run_cli(["eval", "--checkpoint", best, "--data", other, "--split", "all"])
    assert json_lines(scored.stdout)[0]["samples"] == 12


def test_eval_without_data_scores_the_data_the_checkpoints_run_trained_on(tiny_shapes, one_epoch, tmp_path):
    """`eval --checkpoint RUN/checkpoints/best.pt` was refused for a missing --data; the run folder names its data."""
    best = one_epoch / "checkpoints" / "best.pt"
    given = json_lines(run_cli(["eval", "--checkpoint", best, "--data", tiny_shapes]).stdout)[0]
    for nproc in (1, 2):
        own = json_lines(run_cli(["eval", "--checkpoint", best, "--nproc", nproc]).stdout)[0]
        assert (own["samples"], own["top1"]) == (given["samples"], given["top1"])
    alone = tmp_path / "model.pt"  # the checkpoint away from its run folder: nothing to take the data from
    alone.write_bytes(best.read_bytes())
    refused = run_cli(["eval", "--checkpoint", alone], check=False)
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        f"ddptrain eval: error: give --data to score {alone} on: it is not in the checkpoints/ folder of a run"
    ]


def test_eval_on_another_folder_says_the_split_differs(tiny_shapes, one_epoch, tmp_path):
    moved = tmp_path / "model.pt"  # the checkpoint alone, away from its run's splits/
    moved.write_bytes((one_epoch / "checkpoints" / "best.pt").read_bytes())
    other = write_synthetic(tmp_path / "other", classes=3, per_class=14)
    proc = run_cli(["eval", "--checkpoint", moved, "--data", other], check=False)
    assert proc.returncode != 0
    assert "does not give the validation split" in proc.stderr and "here 30 train / 12 val" in proc.stderr
    assert "the checkpoint's 27 / 9" in proc.stderr
    assert json_lines(run_cli(["eval", "--checkpoint", moved, "--data", tiny_shapes]).stdout)[0]["samples"] == 9
