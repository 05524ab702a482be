"""--log-to tensorboard,csv,mlflow on 2 processes, read back through MLflow's client: the options as parameters, one
point per epoch, the run's files as artifacts; a resume continues the same MLflow run and metrics.csv."""

from __future__ import annotations

import csv
import json

import yaml

from ..conftest import TINY, read_metrics, run_cli


def test_mlflow_and_csv_get_every_epoch_and_a_resume_continues_the_same_run(tiny_shapes, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    store = (tmp_path / "mlflow").as_uri()  # a file store, as a user's MLFLOW_TRACKING_URI (no network, no server)
    env = {"MLFLOW_TRACKING_URI": store, "MLFLOW_ALLOW_FILE_STORE": "true", "MLFLOW_EXPERIMENT_NAME": "e2e"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)  # for the client here too
    run_dir = tmp_path / "run"
    flags = ["--data", tiny_shapes, "--out", run_dir, *TINY, "--nproc", 2, "--log-to", "tensorboard,csv,mlflow"]
    run_cli(["train", *flags, "--epochs", 2], env_extra=env)

    run_id = json.loads((run_dir / "trackers.json").read_text())["mlflow"]
    client = MlflowClient(store)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    config = yaml.safe_load((run_dir / "config.yaml").read_text())  # the resolved options
    config.pop("config_version")
    listed = {
        key: ",".join(f"{v:g}" for v in value) if isinstance(value, list) else str(value)
        for key, value in config.items()
    }
    assert run.data.params == listed
    assert (run.data.params["lr"], run.data.params["batch_size"], run.data.params["model"]) == (
        "0.001",
        "2",
        "timm:test_resnet",
    )
    metrics = read_metrics(run_dir)
    for key in ("train_loss", "val_top1", "lr"):
        history = client.get_metric_history(run_id, key)
        assert [(m.step, m.value) for m in history] == [(e["epoch"] + 1, e[key]) for e in metrics], key
    files = {a.path for a in client.list_artifacts(run_id)} | {a.path for a in client.list_artifacts(run_id, "report")}
    assert {"best_eval.json", "config.yaml", "report/curves.png", "report/confusion.png"} <= files
    assert list(run_dir.glob("tb/events.out.tfevents.*"))  # TensorBoard as always
    with open(run_dir / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(row["epoch"]) for row in rows] == [0, 1]
    assert [float(row["val_top1"]) for row in rows] == [e["val_top1"] for e in metrics]

    run_cli(["train", *flags, "--epochs", 3, "--resume", "auto"], env_extra=env)
    assert json.loads((run_dir / "trackers.json").read_text())["mlflow"] == run_id
    assert [r.info.run_id for r in client.search_runs([run.info.experiment_id])] == [run_id]  # no second run
    run = client.get_run(run_id)
    assert (run.info.status, run.data.params["epochs"], run.data.tags["resumed.epochs"]) == ("FINISHED", "2", "3")
    assert [m.step for m in client.get_metric_history(run_id, "val_top1")] == [1, 2, 3]
    with open(run_dir / "metrics.csv", newline="") as handle:
        assert [int(row["epoch"]) for row in csv.DictReader(handle)] == [0, 1, 2]
