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
start stops the run with one line (and `check_backend` finds most such cases before any process starts).

A tracker never holds the training loop: once started, each one's calls run in order on a thread of its own
(`_Lane`) and the loop only queues them. A call that fails is warned about once per kind of failure; after
MAX_FAILURES failures in a row, or a call that has not returned within CALL_TIMEOUT_S (a server that stopped
answering), the tracker is disabled with one warning and the run goes on — metrics.jsonl has every epoch. At the
end the queued calls get CLOSE_TIMEOUT_S to finish. MLflow's own HTTP timeout and retries are lowered (unless set)
so that one call cannot take MLflow's default 7 x 120 s.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..config import format_channels
from ..errors import ConfigError, DdptrainError, missing_tracker_package
from ..runtime.preempt import Preempted
from ..util import first_line, redact, write_json_atomic, write_text_atomic

log = logging.getLogger("ddptrain")

CSV = "metrics.csv"
IDS = "trackers.json"  # {"mlflow": run id, "wandb": run id}: what a resumed run continues
NOT_SERIES = ("epoch", "time")  # every point's step and timestamp, not metrics of their own
PARAM_CHARS = 500  # per parameter value: what older MLflow servers accept (newer ones take 6000)
MLFLOW_BATCH = 100  # parameters per log_batch call (MLflow's limit)
FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"  # KILLED: stopped by a signal, to be resumed
# --log-to: where per-epoch metrics go besides metrics.jsonl and TensorBoard (always written); the Python module each
# optional one needs, and the extra that installs it (`pip install 'ddptrain[mlflow]'`)
TRACKERS = ("csv", "mlflow", "wandb")
TRACKER_MODULES = {"mlflow": "mlflow", "wandb": "wandb"}
MAX_FAILURES = 3  # failed calls in a row before a tracker is disabled
CALL_TIMEOUT_S = 90.0  # a call still running after this long: the server stopped answering
CLOSE_TIMEOUT_S = 30.0  # what the end of a run waits for a tracker's queued calls
MAX_PENDING = 64  # queued calls of one tracker; more means it cannot keep up
# MLflow's HTTP client: seconds per request and retries (its defaults, 120 s x 7 retries, would hold a call for long)
MLFLOW_HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "20", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2"}


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
        for name, value in MLFLOW_HTTP_DEFAULTS.items():
            os.environ.setdefault(name, value)
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
        log.info("mlflow: run %s in experiment %r at %s", self.run_id, experiment, redact(self.uri))
        return self.run_id

    def _continue(self, run_id: str, config: Dict[str, Any]) -> bool:
        """Continue the stored run; parameters cannot change in MLflow, so options changed on resume (--epochs)
        become tags `resumed.KEY`."""
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException:
            log.warning("mlflow: run %s (RUN_DIR/%s) is not at %s; starting a new run", run_id, IDS, redact(self.uri))
            return False
        self.run_id = run_id
        self.client.update_run(run_id, status="RUNNING")
        logged = run.data.params
        for key, value in config.items():
            if key in logged and logged[key] != param_text(value):
                self.client.set_tag(run_id, f"resumed.{key}", param_text(value))
        log.info("mlflow: continuing run %s at %s", run_id, redact(self.uri))
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
    """An option's value as an MLflow parameter: text without credentials (per-channel values as typed on the command
    line, 0.5,0.5,0.5), long ones cut (with a mark that they were)."""
    text = format_channels(value) if isinstance(value, (tuple, list)) else redact(str(value))
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
            config=None if resume_id else redacted(config),
            mode=None if os.environ.get("WANDB_MODE") else "offline",
            settings=wandb.Settings(console="off", quiet=True),  # train.log has the console; no summary table
        )
        if resume_id:
            self.run.config.update(redacted(config), allow_val_change=True)
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


def redacted(config: Dict[str, Any]) -> Dict[str, Any]:
    """The options as a tracker may keep them: URLs without their credentials."""
    return {key: redact(value) if isinstance(value, str) else value for key, value in config.items()}


def make_tracker(name: str, run_dir: Path, history: Sequence[Dict]) -> Tracker:
    if name == "csv":
        return CsvTracker(run_dir / CSV, history)
    if name == "mlflow":
        return MLflowTracker(run_dir)
    if name == "wandb":
        return WandbTracker(run_dir)
    raise unknown_tracker(name)  # checks.py refuses it before launch


def unknown_tracker(name: str) -> ConfigError:
    return ConfigError(f"--log-to {name}: not a tracker; give a comma list of {', '.join(TRACKERS)}")


class _Lane:
    """One tracker's calls, made in order on a thread of its own: the training loop queues a call and goes on, so a
    slow or dead tracking server can cost the tracker, never the run."""

    def __init__(self, tracker: Tracker):
        self.tracker, self.name = tracker, tracker.name
        self.calls: queue.Queue = queue.Queue(MAX_PENDING)
        self.disabled: Optional[str] = None
        self.busy_since: Optional[float] = None
        self.failures_in_a_row = 0
        self.warned: set = set()
        self.thread = threading.Thread(target=self._work, name=f"ddptrain-{self.name}", daemon=True)
        self.thread.start()

    def submit(self, what: str, call: Callable, *args) -> None:
        busy = self.busy_since
        if self.disabled is None and busy is not None and time.monotonic() - busy > CALL_TIMEOUT_S:
            self._disable(f"a call has not returned for over {CALL_TIMEOUT_S:g} s (the server stopped answering?)")
        if self.disabled is not None:
            return
        try:
            self.calls.put_nowait((what, call, args))
        except queue.Full:
            self._disable(f"{MAX_PENDING} calls are waiting (the server is too slow)")

    def _work(self) -> None:
        while True:
            item = self.calls.get()
            try:
                if item is None:
                    return
                self._make(*item)
            finally:
                self.calls.task_done()

    def _make(self, what: str, call: Callable, args: tuple) -> None:
        if self.disabled is not None:
            return
        self.busy_since = time.monotonic()
        try:
            call(*args)
            self.failures_in_a_row = 0
        except Exception as error:
            self._failed(what, error)
        finally:
            self.busy_since = None

    def _failed(self, what: str, error: Exception) -> None:
        self.failures_in_a_row += 1
        kind = type(error).__name__
        if self.failures_in_a_row >= MAX_FAILURES:
            self._disable(
                f"{MAX_FAILURES} calls failed in a row, the last with {redact(first_line(error, 400, kind=True))}"
            )
        elif kind not in self.warned:
            self.warned.add(kind)
            log.warning(
                "--log-to %s: could not log %s (%s); training goes on, metrics.jsonl has every epoch (further "
                "failures of this kind are not reported)",
                self.name,
                what,
                redact(first_line(error, 400, kind=True)),
            )

    def _disable(self, why: str) -> None:
        if self.disabled is None:
            self.disabled = why
            log.warning(
                "--log-to %s: %s; %s is disabled for the rest of this run; training goes on, metrics.jsonl has "
                "every epoch",
                self.name,
                why,
                self.name,
            )

    def close(self, timeout_s: float) -> bool:
        """Let the queued calls finish within `timeout_s`; whether they did."""
        try:
            self.calls.put(None, timeout=max(0.0, timeout_s))
        except queue.Full:
            return False
        self.thread.join(timeout_s)
        return not self.thread.is_alive()


class Trackers:
    """Rank 0's --log-to trackers (TensorBoard aside: `sinks.TensorBoard`) and their ids in RUN_DIR/trackers.json."""

    def __init__(self, trackers: Sequence[Tracker] = ()):
        self.trackers = list(trackers)
        self.lanes = [_Lane(tracker) for tracker in self.trackers]

    @property
    def take_artifacts(self) -> bool:
        return any(lane.tracker.takes_artifacts and lane.disabled is None for lane in self.lanes)

    @classmethod
    def start(
        cls, names: Sequence[str], run_dir: Path, config: Dict[str, Any], resumed: bool, history: Sequence[Dict]
    ) -> Trackers:
        """Open each tracker (a resumed run continues the runs kept in trackers.json), or fail with one line."""
        ids_file = run_dir / IDS
        kept = read_ids(ids_file) if resumed else {}
        opened: List[Tracker] = []
        ids: Dict[str, Optional[str]] = dict(kept)  # a tracker left out on this resume keeps its id for a later one
        for name in names:
            try:
                tracker = make_tracker(name, run_dir, history)
                ids[name] = tracker.start(config, kept.get(name))
            except BaseException as error:
                cls(opened).close(FAILED)  # the ones already started
                if isinstance(error, DdptrainError) or not isinstance(error, Exception):
                    raise
                raise TrackerError(
                    f"--log-to {name}: cannot start: {redact(first_line(error, 400, kind=True))}"
                ) from error
            opened.append(tracker)
        ids = {name: run_id for name, run_id in ids.items() if run_id}
        if ids or ids_file.exists():
            write_json_atomic(ids_file, ids)
        return cls(opened)

    def log_epoch(self, record: Dict) -> None:
        for lane in self.lanes:
            lane.submit(f"epoch {record['epoch'] + 1}", lane.tracker.log_epoch, record)

    def log_artifacts(self, paths: Sequence[Path]) -> None:
        present = [path for path in paths if path.exists()]
        for lane in self.lanes:
            if lane.tracker.takes_artifacts and present:
                lane.submit("files", lane.tracker.log_artifacts, present)

    def flush(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Wait (at most `timeout_s`) until every queued call has been made: what tests and the end of a run need."""
        deadline = time.monotonic() + timeout_s
        for lane in self.lanes:
            while lane.thread.is_alive() and lane.calls.unfinished_tasks:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)

    def close(self, status: str) -> None:
        """The run's end: each tracker's last call, then at most CLOSE_TIMEOUT_S for the queued calls to finish."""
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        for lane in self.lanes:
            lane.submit("the end of the run", lane.tracker.close, status)
        for lane in self.lanes:
            if not lane.close(deadline - time.monotonic()) and lane.disabled is None:
                log.warning(
                    "--log-to %s: its last calls did not finish within %g s and were abandoned; metrics.jsonl has "
                    "every epoch",
                    lane.name,
                    CLOSE_TIMEOUT_S,
                )


def read_ids(path: Path) -> Dict[str, str]:
    """trackers.json, or nothing when it is missing or unreadable (the trackers then start new runs)."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in found.items() if v} if isinstance(found, dict) else {}


PROBE_TIMEOUT_S = 15.0
MLFLOW_PROBE_ENV = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "5", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}


def check_backend(name: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Before any process starts: a tracker whose backend cannot be opened (a server that does not answer, bad
    credentials, a store the library refuses) is one line now, not a failure after launch on some rank."""
    if name == "mlflow":
        _check_mlflow(timeout_s)
    elif name == "wandb":
        _check_wandb(timeout_s)


def _check_mlflow(timeout_s: float) -> None:
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        return  # a file store in RUN_DIR/mlruns, which the run makes (and opts in to: MLFLOW_ALLOW_FILE_STORE)
    shown = f"MLFLOW_TRACKING_URI={redact(uri)}"

    def probe() -> None:
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)

    saved = {key: os.environ.get(key) for key in MLFLOW_PROBE_ENV}
    os.environ.update(MLFLOW_PROBE_ENV)
    try:
        error = _within(probe, timeout_s)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if error is _TIMED_OUT:
        raise ConfigError(
            f"--log-to mlflow: the tracking server at {shown} did not answer within {timeout_s:g} s; check the "
            "server and the address, or drop mlflow from --log-to"
        )
    if error is not None:
        text = str(error)
        if "MLFLOW_ALLOW_FILE_STORE" in text:
            hint = (
                "it is a file store, which this MLflow refuses unless MLFLOW_ALLOW_FILE_STORE=true; set that, or "
                "unset MLFLOW_TRACKING_URI (runs are then kept in RUN_DIR/mlruns)"
            )
        elif any(
            code in text for code in ("401", "403", "nauthorized", "orbidden", "UNAUTHENTICATED", "PERMISSION_DENIED")
        ):
            hint = "the server refuses the credentials (MLFLOW_TRACKING_USERNAME/PASSWORD or MLFLOW_TRACKING_TOKEN)"
        else:
            hint = redact(first_line(error, 400, kind=True))
        raise ConfigError(f"--log-to mlflow: cannot use {shown}: {hint}")


def _check_wandb(timeout_s: float) -> None:
    import netrc
    import socket
    import urllib.parse

    mode = (os.environ.get("WANDB_MODE") or "offline").lower()
    if mode in ("offline", "dryrun", "disabled"):
        return
    base = os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai"
    parsed = urllib.parse.urlparse(base)
    host, port = parsed.hostname or "", parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        stored = netrc.netrc().authenticators(host) if host else None
    except (OSError, netrc.NetrcParseError):
        stored = None
    if not os.environ.get("WANDB_API_KEY") and not stored:
        raise ConfigError(
            f"--log-to wandb with WANDB_MODE={mode} needs an API key for {redact(base)}: set WANDB_API_KEY (or run "
            "`wandb login`), or unset WANDB_MODE to log offline into RUN_DIR/wandb"
        )
    try:
        socket.create_connection((host, port), timeout=min(5.0, timeout_s)).close()
    except OSError as error:
        raise ConfigError(
            f"--log-to wandb: cannot reach {redact(base)} ({error}); check the network or WANDB_BASE_URL, or unset "
            "WANDB_MODE to log offline into RUN_DIR/wandb"
        ) from None


_TIMED_OUT = TimeoutError("timed out")


def _within(call: Callable[[], None], timeout_s: float) -> Optional[BaseException]:
    """Run `call` on a helper thread for at most `timeout_s`: its exception, _TIMED_OUT, or None."""
    outcome: List[Optional[BaseException]] = [_TIMED_OUT]

    def run() -> None:
        try:
            call()
            outcome[0] = None
        except Exception as error:
            outcome[0] = error

    thread = threading.Thread(target=run, name="ddptrain-probe", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return outcome[0]
