"""The run directory has one owner: what a run leaves there, whether a run is there already, whose files are whose,
and clearing it for `--overwrite`. The standard library only, so the command line checks it before any process
starts; rank 0 takes the lock (`runlock.py`) and claims the folder for the whole run.

Ownership is written down, never guessed from names. At its start a run writes `RUN_DIR/.ddptrain-run.json` (the
marker): its run id, and which of the entries a run writes (`RUN_ENTRIES`) did not exist before it — those are
the run's. `--overwrite` removes only what the marker says is the run's, and inside its folders only the files a
run writes (`checkpoints/last.pt`, never an exported `best.safetensors`); a folder without a marker is refused,
not cleared. A fresh start into a folder that already holds entries of those names (a project's own `report/`,
`checkpoints/`) is refused before launch, so a run never mixes its files with a user's.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Dict, List, Optional

from ..config import Config
from ..errors import ConfigError, DataError
from ..runtime.preempt import Preempted
from ..util import DamagedLine, counted, read_epoch_records, write_json_atomic
from ..version import __version__
from .runlock import RunLock

log = logging.getLogger("ddptrain")

MARKER = ".ddptrain-run.json"
MARKER_FORMAT, MARKER_VERSION = "ddptrain-run", 1
# Everything a run writes in its directory, and (for folders) the files in them that are the run's: a pattern per
# file a run writes there; None: the whole folder is written for the run by a library (MLflow's, W&B's files).
RUN_ENTRIES: Dict[str, Optional[str]] = {
    "checkpoints": r"(last|best|step-\d+)\.pt|\.(last|best|step-\d+)\.pt\.(tmp|link)-\d+",
    "metrics.jsonl": "",
    "best_eval.json": "",
    "tb": r"events\.out\.tfevents\..+",
    "train.log": "",
    "config.yaml": "",
    "class_indices.json": "",
    "splits": r"(train|val)\.txt",
    "report": r"(curves|throughput|epoch_time|confusion(-\d+-.+)?)\.png|report\.md",
    "metrics.csv": "",  # --log-to csv
    "trackers.json": "",  # the MLflow / W&B run ids a resume continues
    "mlruns": None,  # --log-to mlflow without MLFLOW_TRACKING_URI
    "wandb": None,  # --log-to wandb
}
ENDED = ("finished", "failed")  # how a run that will not be continued by itself ended ("stopped": to be resumed)


CHECKPOINT_SUFFIXES = (".pt", ".safetensors", ".dcp")  # .dcp: a sharded (--strategy fsdp) checkpoint's folder


def checkpoints_in(run_dir: Path) -> List[str]:
    """The names of the checkpoints a run folder holds (any kind a run writes), sorted."""
    folder = run_dir / "checkpoints"
    return sorted(p.name for p in folder.iterdir() if p.suffix in CHECKPOINT_SUFFIXES) if folder.is_dir() else []


def existing_run(run_dir: Path) -> Optional[str]:
    """What a previous run left that a fresh start would overwrite ("2 epochs in metrics.jsonl, 3 checkpoints"),
    or None when there is nothing to lose."""
    found: List[str] = []
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file() and metrics.stat().st_size > 0:
        lines = sum(1 for line in metrics.read_text(errors="replace").splitlines() if line.strip())
        found.append(f"{counted(lines, 'epoch')} in metrics.jsonl")
    checkpoints = checkpoints_in(run_dir)
    if checkpoints:
        found.append(f"checkpoints {', '.join(checkpoints[:4])}{' ...' if len(checkpoints) > 4 else ''}")
    return ", ".join(found) or None


def run_folder_given(path: Path, flag: str = "--checkpoint", prefer: str = "best") -> Optional[str]:
    """Where a run's folder was given for a checkpoint (`--checkpoint runs/a`), the line that says which of its
    checkpoints to give instead (as `flag`, one named `prefer` first); None for any other path."""
    if not path.is_dir() or not ((path / MARKER).is_file() or (path / "checkpoints").is_dir()):
        return None
    folder = path / "checkpoints"
    held = checkpoints_in(path)
    if not held:
        return f"{path} is a run folder with no checkpoint in {folder}: give a checkpoint file"
    pick = next((name for name in held if Path(name).stem == prefer), held[0])
    shown = ", ".join(held[:6]) + (" ..." if len(held) > 6 else "")
    return (
        f"{path} is a run folder, not a checkpoint: give one of its checkpoints ({shown}), e.g. {flag} {folder / pick}"
    )


def read_marker(run_dir: Path) -> Optional[Dict]:
    """The run directory's marker, or None when there is none (a folder no ddptrain run has claimed)."""
    path = run_dir / MARKER
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        raise ConfigError(f"{path} is damaged (not JSON); remove it only if nothing in {run_dir} is a run's") from None
    if not isinstance(marker, dict) or marker.get("format") != MARKER_FORMAT:
        raise ConfigError(f"{path} is not a ddptrain run marker; give another --out")
    if int(marker.get("version", 0)) > MARKER_VERSION:
        raise ConfigError(
            f"{path} is of format {marker['version']}; this ddptrain ({__version__}) knows formats up to "
            f"{MARKER_VERSION}: use the newer ddptrain that wrote it"
        )
    return marker


def present_entries(run_dir: Path) -> List[str]:
    return [name for name in RUN_ENTRIES if os.path.lexists(run_dir / name)]


def check_fresh_start(run_dir: Path, resume: Optional[str], overwrite: bool) -> None:
    """A run that starts from scratch must not silently replace the results of an earlier one, nor mix its files
    with a user's; `--overwrite` needs a marker that says what is the earlier run's."""
    if resume and overwrite:
        raise ConfigError(
            "--resume and --overwrite contradict each other: --resume continues the run in --out, "
            "--overwrite deletes it; give one"
        )
    if resume:
        return
    marker = read_marker(run_dir)
    if overwrite:
        if marker is None and present_entries(run_dir):
            raise ConfigError(
                f"--overwrite: {run_dir} has no {MARKER} (the record each ddptrain run writes at its start of what is "
                f"its own), so none of {', '.join(present_entries(run_dir))} is known to be a run's and ddptrain "
                "deletes nothing it did not write: remove them yourself, or give another --out"
            )
        return
    if marker is None and present_entries(run_dir):
        raise ConfigError(
            f"--out {run_dir} already holds {', '.join(present_entries(run_dir))}, which no ddptrain run claimed (it has "
            f"no {MARKER}): a run would mix its files with them. Give an empty or new --out (a run of an older "
            "ddptrain continues with --resume auto)"
        )
    previous = existing_run(run_dir)
    if previous:
        raise ConfigError(
            f"--out {run_dir} already holds a run ({previous}); use --resume auto to continue it, "
            "--overwrite to delete it and start over, or another --out"
        )


def check_metrics_readable(run_dir: Path) -> None:
    """A resume stops here, before any process starts, on a damaged line in the middle of metrics.jsonl (rank 0
    drops a last line cut short by a crash later, with a warning)."""
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        try:
            read_epoch_records(metrics)
        except DamagedLine as error:
            raise DataError(str(error)) from None


def check_apart(out_flag: str, out: Path, data_flag: str, data: str) -> None:
    """The output folder and the data may not contain each other: a run folder inside the data becomes a class (or
    its report's PNGs training images), and the data inside a run folder is one `--overwrite` from loss. URLs are
    never local folders."""
    if "://" in data:
        return
    out_real, data_real = Path(os.path.realpath(out)), Path(os.path.realpath(data))
    if out_real == data_real or data_real in out_real.parents:
        where = "is" if out_real == data_real else "is inside"
        raise ConfigError(
            f"{out_flag} {out} {where} {data_flag} {data}: its files would be read as data (a run folder becomes a "
            f"class, its figures training images). Give an {out_flag} outside the data"
        )
    if out_real in data_real.parents:
        raise ConfigError(
            f"{data_flag} {data} is inside {out_flag} {out}: keep the data outside the output folder, so that "
            "nothing done to the output (--overwrite) can reach it"
        )


def check_not_in_use(run_dir: Path) -> None:
    """Fail now, before any process starts, when another job holds the run directory."""
    if (run_dir / RunLock.FILE).is_file() or (run_dir / RunLock.FOLDER).is_dir():
        RunLock(run_dir).acquire().release()


def elastic_continues(run_dir: Path, job_id: str) -> bool:
    """Whether this start of an elastic job's workers continues the run in `run_dir`: its marker says the same job
    (rendezvous id) has been training there and did not finish or fail. torchrun restarts the workers of an elastic
    job when a node joins without counting a restart, so without this the new workers would start the run afresh."""
    marker = read_marker(run_dir)
    if marker is None or marker.get("job") != job_id or existing_run(run_dir) is None:
        return False
    return (marker.get("ended") or {}).get("how") not in ENDED


def claim(run_dir: Path, resume: Optional[str], overwrite: bool, job_id: Optional[str] = None) -> RunLock:
    """Rank 0, before anything is written: take the lock, refuse to replace an earlier run silently, with
    --overwrite remove that run's own files, and write the marker that says what this run owns."""
    lock = RunLock(run_dir).acquire()
    try:
        check_fresh_start(run_dir, resume, overwrite)
        marker = read_marker(run_dir)
        if overwrite and marker is not None:
            removed = clear_run(run_dir, marker)
            if removed:
                log.warning("--overwrite: removed the earlier run's %s from %s", ", ".join(removed), run_dir)
        write_marker(run_dir, _claimed(run_dir, marker, resume, overwrite, job_id))
    except BaseException:
        lock.release()
        raise
    return lock


def _claimed(run_dir: Path, marker: Optional[Dict], resume: Optional[str], overwrite: bool, job: Optional[str]) -> Dict:
    if marker is None:
        # A run directory of an older ddptrain that is resumed: the user says it is theirs; its run entries are the run's.
        adopted = bool(resume) and existing_run(run_dir) is not None
        owned = list(RUN_ENTRIES) if adopted else [name for name in RUN_ENTRIES if name not in present_entries(run_dir)]
        marker = {"format": MARKER_FORMAT, "version": MARKER_VERSION, "owned": owned, "created": time.time()}
    if marker.get("run_id") is None or overwrite or (not resume and existing_run(run_dir) is None):
        marker["run_id"] = uuid.uuid4().hex
    return {**marker, "ddptrain": __version__, "started": time.time(), "job": job, "ended": None, "pid": os.getpid()}


def write_marker(run_dir: Path, marker: Dict) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / MARKER, marker)


def record_end(run_dir: Path, how: str, step: int) -> None:
    """How the run ended (finished, failed, stopped to be resumed) and at which optimizer step: what the launcher
    reports after a Ctrl-C, and what tells an elastic job's next workers whether to continue."""
    marker = read_marker(run_dir)
    if marker is not None:
        write_marker(run_dir, {**marker, "ended": {"how": how, "step": step, "at": time.time()}})


def stopped_since(run_dir: Path, since: float) -> Optional[int]:
    """The step at which the run saved a checkpoint and stopped (on a signal) after `since`, or None."""
    try:
        ended = (read_marker(run_dir) or {}).get("ended") or {}
    except ConfigError:
        return None
    if ended.get("how") == "stopped" and float(ended.get("at", 0)) >= since:
        return int(ended.get("step", 0))
    return None


def clear_run(run_dir: Path, marker: Dict) -> List[str]:
    """--overwrite: remove what the marker says an earlier run wrote — inside its folders only the files a run
    writes there — and nothing else, so nothing of it mixes with the new run and nothing of anyone else's goes."""
    removed = []
    for name in marker.get("owned", []):
        pattern = RUN_ENTRIES.get(name, "")
        entry = run_dir / name
        if not os.path.lexists(entry):
            continue
        if entry.is_dir() and not entry.is_symlink():
            if pattern is None:
                shutil.rmtree(entry)
            elif pattern:
                _remove_matching(entry, re.compile(pattern))
                if any(entry.iterdir()):
                    removed.append(f"{name}/ (its run files)")
                    continue
                entry.rmdir()
            else:
                continue  # a folder where a run writes a file: not the run's
        elif pattern is None or pattern:
            continue  # a file where a run writes a folder: not the run's
        else:
            entry.unlink()
        removed.append(name)
    return removed


def _remove_matching(folder: Path, pattern: re.Pattern) -> None:
    for item in folder.iterdir():
        if pattern.fullmatch(item.name) and (item.is_file() or item.is_symlink()):
            item.unlink()


def job_id(cfg: Config) -> Optional[str]:
    """An elastic job's identity across its re-formations: its rendezvous id (None for a static job)."""
    return cfg.launch.rdzv_id if cfg.launch.rdzv_endpoint else None


def ending(failure: Optional[BaseException], more_epochs: bool) -> str:
    """How a run ended, for its marker: stopped (a signal or --stop-after-epochs: to be resumed), failed, finished."""
    if isinstance(failure, Preempted) or (failure is None and more_epochs):
        return "stopped"  # with a checkpoint at the point where it stopped
    if isinstance(failure, KeyboardInterrupt):
        return "interrupted"
    return "failed" if failure is not None else "finished"
