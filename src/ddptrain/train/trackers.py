"""--log-to: where rank 0 also sends each epoch's record, besides metrics.jsonl and TensorBoard (always written):
RUN_DIR/metrics.csv, MLflow, Weights & Biases; and, at the end, the run's files (config.yaml, best_eval.json, the
report's figures).

Every tracker gets the record metrics.jsonl gets (`sinks.epoch_record`), after that line is written. MLflow and W&B
are imported only when asked for (`pip install 'ddptrain[mlflow]'` / `'ddptrain[wandb]'`; `checks.py` finds a
missing one before any process starts). Their run ids are kept in RUN_DIR/trackers.json, so a resumed run
(`--resume`, a restart) continues the same MLflow or W&B run. Epochs after the checkpoint that a crashed attempt had
already logged are logged again, with the same step: MLflow keeps both points of such an epoch (metrics.jsonl and
metrics.csv keep each epoch once).

Trackers start with the sinks, before training, like the TensorBoard writer and for its reason (`sinks.TensorBoard`:
no thread may start while loaders fork). MLflow's telemetry thread (which also reaches the network) is turned off
unless MLFLOW_DISABLE_TELEMETRY is set; W&B keeps threads of its own from `wandb.init` on. A tracker that cannot
start stops the run with one line; one that fails later is warned about once, and training goes on.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..errors import DdptrainError, missing_tracker_package
from ..runtime.preempt import Preempted
from ..util import write_json_atomic, write_text_atomic

log = logging.getLogger("ddptrain")

CSV = "metrics.csv"
IDS = "trackers.json"  # {"mlflow": run id, "wandb": run id}: what a resumed run continues
NOT_SERIES = ("epoch", "time")  # every point's step and timestamp, not metrics of their own
PARAM_CHARS = 500  # per parameter value: what older MLflow servers accept (newer ones take 6000)
MLFLOW_BATCH = 100  # parameters per log_batch call (MLflow's limit)
FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"  # KILLED: stopped by a signal, to be resumed


class TrackerError(DdptrainError):
    pass


def run_status(failure: Optional[BaseException]) -> str:
    """How a run ended, in MLflow's words: FINISHED (also stopped as asked), KILLED (a signal; resumable), FAILED."""
    if failure is None:
        return FINISHED
    return KILLED if isinstance(failure, (Preempted, KeyboardInterrupt)) else FAILED


def numeric_values(record: Dict) -> Dict[str, float]:
    """The record's numbers: what MLflow and W&B plot (per-rank lists, the epoch and the time left out)."""
    return {
        key: float(value)
        for key, value in record.items()
        if key not in NOT_SERIES and isinstance(value, (int, float)) and not isinstance(value, bool)
    }


class Tracker:
    """One destination; every method does nothing unless a tracker needs it."""

    name = ""
    takes_artifacts = False

    def start(self, config: Dict[str, Any], resume_id: Optional[str]) -> Optional[str]:
        """Open a run (`config`: the flat options), or continue the run `resume_id`; the id to keep for a resume."""
        return None

    def log_epoch(self, record: Dict) -> None:
        pass

    def log_artifacts(self, paths: Sequence[Path]) -> None:
        pass

    def close(self, status: str) -> None:
        pass


class CsvTracker(Tracker):
    """RUN_DIR/metrics.csv, one row per epoch, the records of metrics.jsonl. At start it is rewritten from
    metrics.jsonl, which the sinks have already cut back to the resumed epoch, so a resume never repeats a row; then
    each epoch appends one. A column first seen in a later record (val_ entries after an epoch that --eval-every did
    not evaluate) rewrites the file with that column added to the header."""

    name = "csv"

    def __init__(self, path: Path, history: Sequence[Dict]):
        self.path, self.rows = path, list(history)
        self.columns: List[str] = []

    def start(self, config: Dict[str, Any], resume_id: Optional[str]) -> Optional[str]:
        self._rewrite()
        return None

    def log_epoch(self, record: Dict) -> None:
        self.rows.append(record)
        if any(key not in self.columns for key in record):
            self._rewrite()
            return
        with open(self.path, "a", encoding="utf-8", newline="") as handle:
            handle.write(self._text([record], header=False))

    def _rewrite(self) -> None:
        self.columns = list(dict.fromkeys(key for row in self.rows for key in row))  # the first record's keys first
        if self.rows:
            write_text_atomic(self.path, self._text(self.rows, header=True))
        else:
            self.path.unlink(missing_ok=True)

    def _text(self, rows: Sequence[Dict], header: bool) -> str:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=self.columns, lineterminator="\n")
        if header:
            writer.writeheader()
        for row in rows:
            writer.writerow({key: json.dumps(v) if isinstance(v, (list, dict)) else v for key, v in row.items()})
        return out.getvalue()


class MLflowTracker(Tracker):
    """An MLflow run: the options as parameters, each epoch's numbers as metrics at step = epoch number (from 1), the
    run's files as artifacts. Tracking URI: MLFLOW_TRACKING_URI, else a file store in RUN_DIR/mlruns; experiment:
    MLFLOW_EXPERIMENT_NAME, else "ddptrain"."""

    name = "mlflow"
    takes_artifacts = True

    def __init__(self, run_dir: Path):
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # no usage reports (a thread, the network)
        try:
            import mlflow  # noqa: F401  (the package itself first: its submodules may be loaded already)
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise missing_tracker_package("mlflow") from None
        self.run_dir = run_dir
        self.uri = os.environ.get("MLFLOW_TRACKING_URI") or (run_dir / "mlruns").absolute().as_uri()
        if not os.environ.get("MLFLOW_TRACKING_URI"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks file stores to opt in
        self.client = MlflowClient(tracking_uri=self.uri)
        self.run_id = ""

    def start(self, config: Dict[str, Any], resume_id: Optional[str]) -> Optional[str]:
        from mlflow.entities import Param

        if resume_id and self._continue(resume_id, config):
            return self.run_id
        experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "ddptrain"
        tags = {"mlflow.source.name": "ddptrain", "ddptrain.run_dir": str(self.run_dir.absolute())}
        run = self.client.create_run(self._experiment_id(experiment), run_name=self.run_dir.name, tags=tags)
        self.run_id = run.info.run_id
        params = [Param(key, param_text(value)) for key, value in config.items()]
        for first in range(0, len(params), MLFLOW_BATCH):
            self.client.log_batch(self.run_id, params=params[first : first + MLFLOW_BATCH])
        log.info("mlflow: run %s in experiment %r at %s", self.run_id, experiment, self.uri)
        return self.run_id

    def _continue(self, run_id: str, config: Dict[str, Any]) -> bool:
        """Continue the stored run; parameters cannot change in MLflow, so options changed on resume (--epochs)
        become tags `resumed.KEY`."""
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException:
            log.warning("mlflow: run %s (RUN_DIR/%s) is not at %s; starting a new run", run_id, IDS, self.uri)
            return False
        self.run_id = run_id
        self.client.update_run(run_id, status="RUNNING")
        logged = run.data.params
        for key, value in config.items():
            if key in logged and logged[key] != param_text(value):
                self.client.set_tag(run_id, f"resumed.{key}", param_text(value))
        log.info("mlflow: continuing run %s at %s", run_id, self.uri)
        return True

    def _experiment_id(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(name)
        except Exception:  # another job created it meanwhile
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    def log_epoch(self, record: Dict) -> None:
        from mlflow.entities import Metric

        stamp, step = int(record.get("time", time.time()) * 1000), record["epoch"] + 1
        metrics = [Metric(key, value, stamp, step) for key, value in numeric_values(record).items()]
        self.client.log_batch(self.run_id, metrics=metrics)

    def log_artifacts(self, paths: Sequence[Path]) -> None:
        for path in paths:
            if path.is_dir():
                self.client.log_artifacts(self.run_id, str(path), artifact_path=path.name)
            else:
                self.client.log_artifact(self.run_id, str(path))

    def close(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=status)


def param_text(value: Any) -> str:
    """An option's value as an MLflow parameter: text, long ones cut (with a mark that they were)."""
    text = str(value)
    return text if len(text) <= PARAM_CHARS else text[: PARAM_CHARS - 3] + "..."


class WandbTracker(Tracker):
    """A Weights & Biases run in RUN_DIR/wandb: the options as its config, each epoch's numbers against `epoch`, the
    run's files saved. Offline unless WANDB_MODE says otherwise (`wandb sync RUN_DIR/wandb/offline-run-*` uploads);
    project: WANDB_PROJECT, else "ddptrain"."""

    name = "wandb"
    takes_artifacts = True

    def __init__(self, run_dir: Path):
        try:
            import wandb
        except ImportError:
            raise missing_tracker_package("wandb") from None
        self.wandb, self.run_dir = wandb, run_dir
        self.run: Any = None

    def start(self, config: Dict[str, Any], resume_id: Optional[str]) -> Optional[str]:
        wandb = self.wandb
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or "ddptrain",
            dir=str(self.run_dir),
            id=resume_id,
            resume="allow" if resume_id else None,
            name=self.run_dir.name,
            config=None if resume_id else config,
            mode=None if os.environ.get("WANDB_MODE") else "offline",
            settings=wandb.Settings(console="off", quiet=True),  # train.log has the console; no summary table
        )
        if resume_id:
            self.run.config.update(config, allow_val_change=True)
        self.run.define_metric("epoch")
        self.run.define_metric("*", step_metric="epoch")
        log.info("wandb: run %s in %s", self.run.id, self.run_dir / "wandb")
        return str(self.run.id)

    def log_epoch(self, record: Dict) -> None:
        self.run.log({**numeric_values(record), "epoch": record["epoch"] + 1})

    def log_artifacts(self, paths: Sequence[Path]) -> None:
        for path in paths:
            for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
                if file.is_file():
                    self.run.save(str(file), base_path=str(self.run_dir), policy="now")

    def close(self, status: str) -> None:
        self.run.finish(exit_code=0 if status == FINISHED else 1)


def make_tracker(name: str, run_dir: Path, history: Sequence[Dict]) -> Tracker:
    if name == "csv":
        return CsvTracker(run_dir / CSV, history)
    if name == "mlflow":
        return MLflowTracker(run_dir)
    if name == "wandb":
        return WandbTracker(run_dir)
    raise TrackerError(f"--log-to {name}: not a tracker")  # config validation names the choices first


class Trackers:
    """Rank 0's --log-to trackers (TensorBoard aside: `sinks.TensorBoard`) and their ids in RUN_DIR/trackers.json."""

    def __init__(self, trackers: Sequence[Tracker] = ()):
        self.trackers = list(trackers)
        self.warned: set = set()

    @property
    def take_artifacts(self) -> bool:
        return any(tracker.takes_artifacts for tracker in self.trackers)

    @classmethod
    def start(
        cls, names: Sequence[str], run_dir: Path, config: Dict[str, Any], resumed: bool, history: Sequence[Dict]
    ) -> Trackers:
        """Open each tracker (a resumed run continues the runs kept in trackers.json), or fail with one line."""
        ids_file = run_dir / IDS
        kept = read_ids(ids_file) if resumed else {}
        started = cls()
        ids: Dict[str, Optional[str]] = dict(kept)  # a tracker left out on this resume keeps its id for a later one
        for name in names:
            if name == "tensorboard":
                continue
            try:
                tracker = make_tracker(name, run_dir, history)
                ids[name] = tracker.start(config, kept.get(name))
            except BaseException as error:
                started.close(FAILED)  # the ones already started
                if isinstance(error, DdptrainError) or not isinstance(error, Exception):
                    raise
                raise TrackerError(f"--log-to {name}: cannot start: {one_line(error)}") from error
            started.trackers.append(tracker)
        ids = {name: run_id for name, run_id in ids.items() if run_id}
        if ids or ids_file.exists():
            write_json_atomic(ids_file, ids)
        return started

    def log_epoch(self, record: Dict) -> None:
        for tracker in self.trackers:
            self._guarded(tracker, f"epoch {record['epoch'] + 1}", tracker.log_epoch, record)

    def log_artifacts(self, paths: Sequence[Path]) -> None:
        present = [path for path in paths if path.exists()]
        for tracker in self.trackers:
            if tracker.takes_artifacts and present:
                self._guarded(tracker, "files", tracker.log_artifacts, present)

    def close(self, status: str) -> None:
        for tracker in self.trackers:
            self._guarded(tracker, "the end of the run", tracker.close, status)

    def _guarded(self, tracker: Tracker, what: str, call, *args) -> None:
        """A tracker that fails mid-run (a server gone) costs a warning, not the run: metrics.jsonl has it all."""
        try:
            call(*args)
        except Exception as error:
            if tracker.name not in self.warned:
                self.warned.add(tracker.name)
                log.warning(
                    "--log-to %s: could not log %s (%s); training goes on, metrics.jsonl has every epoch "
                    "(further failures of %s are not reported)",
                    tracker.name,
                    what,
                    one_line(error),
                    tracker.name,
                )


def read_ids(path: Path) -> Dict[str, str]:
    """trackers.json, or nothing when it is missing or unreadable (the trackers then start new runs)."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in found.items() if v} if isinstance(found, dict) else {}


def one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:400]
