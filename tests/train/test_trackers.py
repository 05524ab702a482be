"""--log-to: the option, the missing-package error before launch and in the worker, metrics.csv across resumes,
MLflow's default store in the run directory (no thread started while training), W&B offline, and a tracker that
fails mid-run costing a warning only."""

from __future__ import annotations

import csv
import json
import logging
import subprocess
import sys
import threading

import pytest

from ddptrain.checks import check_trackers
from ddptrain.config import Config, build_config
from ddptrain.errors import ConfigError
from ddptrain.train.sinks import MetricsLog
from ddptrain.train.trackers import (
    CSV,
    IDS,
    PARAM_CHARS,
    CsvTracker,
    MLflowTracker,
    Tracker,
    Trackers,
    WandbTracker,
    param_text,
)

from ..conftest import cli_env, write_synthetic
from ..test_cli import BLOCKER as NO_TORCH


def _record(epoch: int, evaluated: bool = True) -> dict:
    record = {"epoch": epoch, "step": 3 * (epoch + 1), "train_loss": 1.0 / (epoch + 1)}
    if evaluated:
        record.update(val_loss=0.5, val_top1=0.25 * epoch, val_top5=1.0)
    record.update(lr=0.1, world_size=2, rank_work_s=[0.1, 0.2], time=1.7e9 + epoch)
    return record


def _rows(path) -> list:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_log_to_is_a_comma_list_of_known_trackers():
    cfg = build_config({"data": "/d", "log_to": "tensorboard, CSV,mlflow,csv"})
    assert cfg.run.trackers() == ["csv", "mlflow"]  # TensorBoard is always written: not a choice
    assert Config().run.trackers() == []
    with pytest.raises(ConfigError, match=r"--log-to neptune: not a tracker; give a comma list of csv, mlflow, wandb"):
        check_trackers(build_config({"data": "/d", "log_to": "csv,neptune"}).run)


@pytest.mark.parametrize("tracker", ["mlflow", "wandb"])
def test_a_missing_tracker_package_is_one_line_before_launch_and_in_the_worker(tracker, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, tracker, None)  # find_spec finds nothing, import fails
    cfg = build_config({"data": "/d", "log_to": f"csv,{tracker}"})
    with pytest.raises(ConfigError) as before:
        check_trackers(cfg.run)
    assert str(before.value) == (
        f"--log-to {tracker}: the {tracker} package is not installed; pip install 'ddptrain[{tracker}]' "
        "(or drop it from --log-to)"
    )
    with pytest.raises(ConfigError) as worker:  # torchrun started by hand: no check before launch
        Trackers.start(cfg.run.trackers(), tmp_path, cfg.to_flat(), resumed=False, history=[])
    assert str(worker.value) == str(before.value)
    check_trackers(build_config({"data": "/d", "log_to": "tensorboard,csv"}).run)  # nothing to install


BLOCKER = NO_TORCH + 'sys.modules["wandb"] = None  # not installed\n'


def test_the_command_line_refuses_a_missing_tracker_before_any_process_starts(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCKER)
    data = write_synthetic(tmp_path / "d", classes=2, per_class=2)
    flags = ["--data", data, "--out", tmp_path / "run", "--nproc", 2, "--log-to", "tensorboard,wandb"]
    proc = subprocess.run(
        [sys.executable, "-m", "ddptrain", "train", *map(str, flags)],
        capture_output=True,
        text=True,
        env=cli_env({"PYTHONPATH": str(tmp_path / "site")}),
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "ddptrain train: error: --log-to wandb: the wandb package is not installed; pip install 'ddptrain[wandb]' "
        "(or drop it from --log-to)"
    ]
    assert not (tmp_path / "run").exists()


def test_csv_has_one_row_per_epoch_across_a_resume_and_takes_columns_that_appear_later(tmp_path):
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    trackers = Trackers.start(["csv"], tmp_path, {}, resumed=False, history=metrics.truncate_after(-1))
    for epoch in range(3):
        record = _record(epoch, evaluated=epoch > 0)  # --eval-every 2-like: no val_ columns in the first record
        metrics.append(record)
        trackers.log_epoch(record)
    trackers.close("KILLED")
    rows = _rows(tmp_path / CSV)
    assert [row["epoch"] for row in rows] == ["0", "1", "2"]
    assert list(rows[0])[:3] == ["epoch", "step", "train_loss"] and "val_top1" in rows[0]
    assert (rows[0]["val_top1"], rows[2]["val_top1"]) == ("", "0.5")
    assert json.loads(rows[1]["rank_work_s"]) == [0.1, 0.2]

    # a crash after epoch 2's line, before its checkpoint: the resume redoes epoch 2 from the checkpoint of epoch 1
    resumed = Trackers.start(["csv"], tmp_path, {}, resumed=True, history=metrics.truncate_after(1))
    assert [row["epoch"] for row in _rows(tmp_path / CSV)] == ["0", "1"]
    redone = {**_record(2), "train_loss": 0.125}
    metrics.append(redone)
    resumed.log_epoch(redone)
    resumed.close("FINISHED")
    rows = _rows(tmp_path / CSV)
    assert [row["epoch"] for row in rows] == ["0", "1", "2"] and rows[2]["train_loss"] == "0.125"
    assert (tmp_path / CSV).read_text().count("epoch,") == 1  # one header


def test_a_csv_tracker_added_on_resume_starts_from_metrics_jsonl(tmp_path):
    tracker = CsvTracker(tmp_path / CSV, [_record(0), _record(1)])
    tracker.start({}, None)
    tracker.log_epoch(_record(2))
    assert [row["epoch"] for row in _rows(tmp_path / CSV)] == ["0", "1", "2"]


def test_mlflow_defaults_to_a_store_in_the_run_dir_and_starts_no_thread_while_training(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_DISABLE_TELEMETRY", "MLFLOW_ALLOW_FILE_STORE"):
        monkeypatch.setenv(name, "")  # recorded, so the test's own changes are undone
        monkeypatch.delenv(name)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "unit")
    config = {"lr": 0.05, "model": "timm:test_resnet", "mean": None, "long": "x" * 2000}
    trackers = Trackers.start(["mlflow"], tmp_path, config, resumed=False, history=[])
    before = {t.ident for t in threading.enumerate()}
    for epoch in range(2):
        trackers.log_epoch(_record(epoch))
    (tmp_path / "best_eval.json").write_text("{}")
    trackers.log_artifacts([tmp_path / "best_eval.json", tmp_path / "not-written.json"])
    trackers.flush()
    assert {t.ident for t in threading.enumerate()} == before  # telemetry off; nothing else starts
    trackers.close("FINISHED")

    run_id = json.loads((tmp_path / IDS).read_text())["mlflow"]
    client = MlflowClient((tmp_path / "mlruns").as_uri())
    run = client.get_run(run_id)
    assert (run.info.status, run.info.run_name) == ("FINISHED", tmp_path.name)
    assert client.get_experiment(run.info.experiment_id).name == "unit"
    assert run.data.params["lr"] == "0.05" and run.data.params["mean"] == "None"
    assert len(run.data.params["long"]) == PARAM_CHARS and run.data.params["long"].endswith("...")
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "val_top1")] == [(1, 0.0), (2, 0.25)]
    assert "epoch" not in run.data.metrics and "rank_work_s" not in run.data.metrics
    assert [a.path for a in client.list_artifacts(run_id)] == ["best_eval.json"]

    # a resume continues the run; an option changed on resume becomes a tag (MLflow parameters cannot change)
    again = Trackers.start(["mlflow"], tmp_path, {**config, "lr": 0.1}, resumed=True, history=[])
    again.flush()
    assert client.get_run(run_id).info.status == "RUNNING"
    again.log_epoch(_record(2))
    again.close("KILLED")
    run = client.get_run(run_id)
    assert (run.info.status, run.data.params["lr"], run.data.tags["resumed.lr"]) == ("KILLED", "0.05", "0.1")
    assert len(client.get_metric_history(run_id, "val_top1")) == 3
    assert len(client.search_runs([run.info.experiment_id])) == 1
    assert isinstance(again.trackers[0], MLflowTracker)


def test_param_text_cuts_long_values():
    assert param_text(None) == "None" and param_text(0.1) == "0.1"
    assert param_text("y" * (PARAM_CHARS + 1)) == "y" * (PARAM_CHARS - 3) + "..."


class _Failing(Tracker):
    name = "flaky"
    takes_artifacts = True

    def __init__(self, errors):
        self.errors, self.calls = list(errors), 0

    def log_epoch(self, record):
        self.calls += 1
        error = self.errors.pop(0) if self.errors else None
        if error is not None:
            raise error

    def log_artifacts(self, paths):
        self.log_epoch({})


def test_a_failing_tracker_is_warned_about_once_per_kind_and_disabled_after_three_failures_in_a_row(caplog):
    # the second call succeeds, so the count of failures in a row starts again after it
    failing = _Failing(
        [ConnectionError("tracking server gone\nsecond line"), None, ConnectionError("again"), TimeoutError("slow")]
        + [ConnectionError("x")] * 3
    )
    trackers = Trackers([failing])
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        for epoch in range(10):
            trackers.log_epoch(_record(epoch))
        trackers.flush()
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings[:2] == [
        "--log-to flaky: could not log epoch 1 (ConnectionError: tracking server gone); training goes on, "
        "metrics.jsonl has every epoch (further failures of this kind are not reported)",
        "--log-to flaky: could not log epoch 4 (TimeoutError: slow); training goes on, metrics.jsonl has every "
        "epoch (further failures of this kind are not reported)",
    ]
    assert warnings[2].startswith("--log-to flaky: 3 calls failed in a row, the last with ConnectionError: x;")
    assert "flaky is disabled for the rest of this run" in warnings[2] and len(warnings) == 3
    assert failing.calls == 5  # nothing more is sent to a disabled tracker


class _Stuck(Tracker):
    name = "stuck"

    def __init__(self):
        self.release = threading.Event()

    def log_epoch(self, record):
        self.release.wait(30)  # a server that accepted the connection and never answers


def test_a_tracker_that_stops_answering_never_holds_the_loop_and_is_disabled(monkeypatch, caplog):
    import time

    from ddptrain.train import trackers as module

    monkeypatch.setattr(module, "CALL_TIMEOUT_S", 0.3)
    monkeypatch.setattr(module, "CLOSE_TIMEOUT_S", 0.5)
    stuck = _Stuck()
    trackers = Trackers([stuck])
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        started = time.monotonic()
        trackers.log_epoch(_record(0))
        trackers.log_epoch(_record(1))
        assert time.monotonic() - started < 0.1  # queued, not waited for
        time.sleep(0.5)
        trackers.log_epoch(_record(2))
        closing = time.monotonic()
        trackers.close("FINISHED")
        assert time.monotonic() - closing < 2
    stuck.release.set()
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "a call has not returned for over 0.3 s" in warnings[0], warnings
    assert "stuck is disabled for the rest of this run" in warnings[0]


@pytest.mark.slow  # W&B starts its own service process: a couple of seconds
def test_wandb_offline_keeps_its_id_and_continues_the_run_on_resume(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline is ddptrain's default
    monkeypatch.setenv("WANDB_SILENT", "true")
    trackers = Trackers.start(["wandb"], tmp_path, {"lr": 0.05}, resumed=False, history=[])
    trackers.log_epoch(_record(0))
    (tmp_path / "best_eval.json").write_text("{}")
    trackers.log_artifacts([tmp_path / "best_eval.json"])
    trackers.close("FINISHED")
    assert not [lane for lane in trackers.lanes if lane.disabled]
    run_id = json.loads((tmp_path / IDS).read_text())["wandb"]

    again = Trackers.start(["wandb"], tmp_path, {"lr": 0.05}, resumed=True, history=[])
    again.log_epoch(_record(1))
    again.close("FINISHED")
    assert isinstance(again.trackers[0], WandbTracker) and again.trackers[0].run.id == run_id
    # W&B names a run's folder offline-run-TIME-ID, with -1, -2, ... after it when the resumed run starts within
    # the same second; each folder's transaction log is run-ID.wandb: one id means every folder holds that file.
    runs = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) >= 1 and all((run / f"run-{run_id}.wandb").is_file() for run in runs), runs
    assert (runs[0] / "files" / "best_eval.json").is_file()
    logged = b"".join(path.read_bytes() for run in runs for path in run.glob("*.wandb"))
    assert b"val_top1" in logged and b"train_loss" in logged
