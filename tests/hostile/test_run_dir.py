"""Ownership of the run directory: `--overwrite` removes only what a ddptrain run wrote there (its marker says which
entries, and inside them only a run's own files), a folder without a marker is refused, a fresh start never mixes
its files with a user's, and --out and --data may not contain each other. The lock keeps a second live job out on
file systems without `flock`, and a lock left by a dead job is taken over."""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import time
from pathlib import Path

import pytest

from ddptrain.errors import ConfigError
from ddptrain.train import runlock
from ddptrain.train.rundir import MARKER, check_apart, check_fresh_start, claim, elastic_continues, record_end
from ddptrain.train.runlock import RunDirInUseError, RunLock

from ..conftest import TINY, cli_env, fault_env, read_metrics, run_cli, started, write_synthetic


def _project(folder: Path) -> dict:
    """A user's project folder whose names collide with a run's: what `--overwrite` deleted on `6e5c216`."""
    files = {
        "report/thesis.tex": "\\documentclass{article}",
        "mlruns/0/meta.yaml": "name: mine",
        "checkpoints/detector.pt": "weights",
        "config.yaml": "mine: true",
        "notes.txt": "keep me",
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return files


def _unchanged(folder: Path, files: dict) -> bool:
    return all((folder / name).read_text() == text for name, text in files.items())


def test_overwrite_of_a_folder_without_a_marker_is_refused_and_deletes_nothing(tmp_path):
    files = _project(tmp_path)
    with pytest.raises(ConfigError, match=rf"--overwrite: {tmp_path} has no {MARKER} .* ddptrain deletes nothing it"):
        check_fresh_start(tmp_path, None, overwrite=True)
    with pytest.raises(ConfigError, match="has no"):
        claim(tmp_path, None, overwrite=True)
    assert _unchanged(tmp_path, files)


def test_a_fresh_start_into_a_folder_holding_names_a_run_writes_is_refused(tmp_path):
    files = _project(tmp_path)
    with pytest.raises(
        ConfigError, match=r"already holds checkpoints, config\.yaml, report, mlruns, which no ddptrain run claimed"
    ):
        check_fresh_start(tmp_path, None, overwrite=False)
    assert _unchanged(tmp_path, files)


def test_a_fresh_start_into_a_folder_of_other_files_is_allowed_and_claims_only_what_it_makes(tmp_path):
    (tmp_path / "slurm-123.out").write_text("log")  # a batch script's own log beside the run
    claim(tmp_path, None, overwrite=False).release()
    marker = json.loads((tmp_path / MARKER).read_text())
    assert set(marker["owned"]) >= {"checkpoints", "report", "mlruns"} and marker["run_id"]


def test_overwrite_removes_only_the_runs_own_files(tmp_path):
    claim(tmp_path, None, overwrite=False).release()
    run_files = [
        "checkpoints/last.pt",
        "checkpoints/best.pt",
        "checkpoints/step-000000004.pt",
        "metrics.jsonl",
        "tb/events.out.tfevents.1.host",
        "report/curves.png",
        "report/report.md",
        "splits/train.txt",
        "mlruns/0/meta.yaml",
        "train.log",
        "config.yaml",
    ]
    kept = {  # an export made from the run, and files the user put in its folders
        "checkpoints/best.safetensors": "export",
        "checkpoints/best.torchscript.pt": "export",
        "checkpoints/best.safetensors.json": "card",
        "checkpoints/step-000000004.torchscript.pt": "export",
        "report/thesis.tex": "mine",
        "notes.txt": "mine",
    }
    for name in run_files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("run")
    for name, text in kept.items():
        (tmp_path / name).write_text(text)
    first_id = json.loads((tmp_path / MARKER).read_text())["run_id"]
    claim(tmp_path, None, overwrite=True).release()
    assert not any((tmp_path / name).exists() for name in run_files)
    assert _unchanged(tmp_path, kept)
    assert not (tmp_path / "tb").exists() and not (tmp_path / "mlruns").exists()
    assert json.loads((tmp_path / MARKER).read_text())["run_id"] != first_id


def test_a_run_dir_of_an_older_ddptrain_resumes_and_is_adopted(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.pt").write_text("x")
    with pytest.raises(ConfigError, match="has no"):
        check_fresh_start(tmp_path, None, overwrite=True)  # without a marker nothing is known to be the run's
    claim(tmp_path, "auto", overwrite=False).release()  # the user resumes it: it is theirs
    assert "checkpoints" in json.loads((tmp_path / MARKER).read_text())["owned"]


@pytest.mark.parametrize(
    ("out", "data", "message"),
    [
        ("d", "d", "--out .*/d is --data"),
        ("d/runs/a", "d", "is inside --data"),
        ("d/cat/run", "d", "is inside --data"),
        ("proj", "proj/images", "--data .* is inside --out"),
        ("proj", "proj/list.csv", "--data .* is inside --out"),
    ],
)
def test_out_and_data_may_not_contain_each_other(tmp_path, out, data, message):
    (tmp_path / "d" / "cat").mkdir(parents=True)
    with pytest.raises(ConfigError, match=message):
        check_apart("--out", tmp_path / out, "--data", str(tmp_path / data))
    check_apart("--out", tmp_path / "runs", "--data", str(tmp_path / "d"))  # side by side: fine
    check_apart("--out", tmp_path / "runs", "--data", "https://host/d/")


def test_out_inside_data_is_refused_before_launch(tmp_path):
    """The report: the run folder became a class, or its PNGs training images (643/161 instead of 640/160)."""
    data = write_synthetic(tmp_path / "data", classes=2, per_class=4)
    proc = run_cli(["train", "--data", data, "--out", data / "disc" / "run", *TINY], check=False)
    assert proc.returncode == 2 and "is inside --data" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (data / "disc" / "run").exists()


# ---- the lock on file systems without flock ----------------------------------------------------------------------


def _no_flock(monkeypatch):
    def refuse(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(runlock.fcntl, "flock", refuse)


def test_where_flock_fails_a_lock_folder_keeps_a_second_live_job_out(tmp_path, monkeypatch, caplog):
    """The report: on NFS without a lock manager every run was refused as 'in use' naming a dead pid."""
    _no_flock(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        first = RunLock(tmp_path).acquire()
    assert any("does not lock files" in r.message for r in caplog.records)
    assert (tmp_path / RunLock.FOLDER / "owner.json").is_file()
    with pytest.raises(
        RunDirInUseError, match=rf"in use by another job \(host {socket.gethostname()}, pid {os.getpid()}"
    ):
        RunLock(tmp_path).acquire()
    first.release()
    assert not (tmp_path / RunLock.FOLDER).exists()
    RunLock(tmp_path).acquire().release()  # free again


def _stale_folder(run_dir: Path, **owner) -> None:
    folder = run_dir / RunLock.FOLDER
    folder.mkdir(parents=True)
    (folder / "owner.json").write_text(json.dumps({"since": time.time() - 600, **owner}))


def test_a_lock_folder_of_a_dead_process_on_this_host_is_taken_over(tmp_path, monkeypatch, caplog):
    _no_flock(monkeypatch)
    _stale_folder(tmp_path, host=socket.gethostname(), pid=999_999_999, beat=time.time())
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        RunLock(tmp_path).acquire().release()
    assert any("pid 999999999 on this host, no longer runs" in r.message for r in caplog.records)


def test_a_lock_folder_of_another_host_is_stale_only_when_its_heartbeat_is(tmp_path, monkeypatch):
    _no_flock(monkeypatch)
    _stale_folder(tmp_path, host="node-elsewhere", pid=1, beat=time.time())
    with pytest.raises(RunDirInUseError, match="host node-elsewhere, pid 1"):
        RunLock(tmp_path).acquire()
    (tmp_path / RunLock.FOLDER / "owner.json").write_text(
        json.dumps({"host": "node-elsewhere", "pid": 1, "beat": time.time() - runlock.STALE_S - 1})
    )
    RunLock(tmp_path).acquire().release()


def test_only_another_holder_counts_as_held(tmp_path):
    with open(tmp_path / RunLock.FILE, "w") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)  # another open file description: another job
        with pytest.raises(RunDirInUseError):
            RunLock(tmp_path).acquire()


@pytest.mark.slow
def test_two_real_jobs_on_a_file_system_without_flock(tiny_shapes, tmp_path):
    """Real processes, flock failing in every one of them: the second job is refused while the first runs, and after
    the first is SIGKILLed a third starts (the dead holder's lock folder is taken over)."""
    run_dir = tmp_path / "run"
    env = cli_env(fault_env("no_flock", rank="all"))
    job = ["train", "--data", tiny_shapes, "--out", run_dir, *TINY, "--resume", "auto", "--nproc", 2]
    import sys

    with started([sys.executable, "-m", "ddptrain", *job, "--epochs", 50], env=env) as first:
        deadline = time.monotonic() + 120
        while not (run_dir / "metrics.jsonl").is_file():
            assert first.poll() is None, first.stdout.read()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.2)
        second = run_cli([*job, "--epochs", 1], check=False, env_extra=fault_env("no_flock", rank="all"))
        assert second.returncode == 2 and "is in use by another job (host" in second.stderr
    done = read_metrics(run_dir)[-1]["epoch"] + 1  # epochs the first job finished before it was killed
    third = run_cli([*job, "--epochs", done + 1], env_extra=fault_env("no_flock", rank="all"))
    assert "took over the run directory's lock" in third.stderr
    assert [m["epoch"] for m in read_metrics(run_dir)][-1] == done  # it trained one more epoch


# ---- the marker across an elastic job's re-formations -------------------------------------------------------------


def test_a_sharded_run_stopped_in_its_first_epoch_is_a_run_to_keep(tmp_path):
    """An FSDP run stopped before its first epoch ended holds only step-*.dcp folders (no metrics line yet): a fresh
    start into its folder is refused as for any run, and the elastic job that wrote it continues it rather than
    starting afresh over its checkpoint."""
    claim(tmp_path, None, overwrite=False, job_id="exp-7").release()
    shards = tmp_path / "checkpoints" / "step-000000003.dcp"
    shards.mkdir(parents=True)
    (shards / "__0_0.distcp").write_bytes(b"shard")
    with pytest.raises(ConfigError, match=r"already holds a run \(checkpoints step-000000003\.dcp\); use --resume"):
        check_fresh_start(tmp_path, None, overwrite=False)
    assert elastic_continues(tmp_path, "exp-7")
    assert (shards / "__0_0.distcp").read_bytes() == b"shard"


def test_an_elastic_job_continues_its_own_run_until_it_finishes(tmp_path):
    claim(tmp_path, None, overwrite=False, job_id="exp-7").release()
    (tmp_path / "metrics.jsonl").write_text('{"epoch": 0}\n')
    assert elastic_continues(tmp_path, "exp-7")
    assert not elastic_continues(tmp_path, "exp-8")  # another job
    record_end(tmp_path, "stopped", 12)  # a membership change stops the workers: continued
    assert elastic_continues(tmp_path, "exp-7")
    record_end(tmp_path, "finished", 20)
    assert not elastic_continues(tmp_path, "exp-7")


def test_shard_overwrite_removes_only_the_shard_set_its_index_lists(tmp_path):
    from ddptrain.tools.shard import make_shards

    data = write_synthetic(tmp_path / "data", classes=2, per_class=3)
    out = tmp_path / "shards"
    out.mkdir()
    (out / "train-999999.tar").write_text("a user's own tar, no index of ours")
    with pytest.raises(ConfigError, match="holds tar files but no readable ddptrain shard index"):
        make_shards(str(data), str(out), "1GB", 0.2, 42, overwrite=True)
    assert (out / "train-999999.tar").read_text().startswith("a user's")
    (out / "train-999999.tar").unlink()
    make_shards(str(data), str(out), "1GB", 0.2, 42, overwrite=False)
    (out / "notes.txt").write_text("mine")
    make_shards(str(data), str(out), "1GB", 0.2, 42, overwrite=True)
    assert (out / "notes.txt").read_text() == "mine" and (out / "shards.json").is_file()
    with pytest.raises(ConfigError, match="is inside --data"):
        make_shards(str(data), str(data / "disc" / "shards"), "1GB", 0.2, 42, overwrite=False)
