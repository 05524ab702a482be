"""One job per run directory: the lock rank 0 holds for the whole run.

The lock is an exclusive `flock` on RUN_DIR/.ddptrain.lock: the kernel releases it when the process ends, however
it ends, so a killed job never leaves a stale lock behind. Only "another process holds it" (EWOULDBLOCK) means the
folder is in use. Some cluster file systems have no working `flock` (NFS without a lock manager, Lustre mounted
`noflock`); there, and wherever DDPTRAIN_RUN_LOCK=folder asks for it (Lustre `localflock`, whose locks only one node
sees), the lock is a folder made atomically (`mkdir`) holding the owner's host, pid and a heartbeat rewritten every
HEARTBEAT_S seconds by a thread. Such a lock is stale when its owner is gone: on this host when the pid no longer
runs, elsewhere when the heartbeat is older than STALE_S; a stale lock is taken over with a warning.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import shutil
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Dict, Optional

from ..errors import ConfigError
from ..util import pid_alive

log = logging.getLogger("ddptrain")

MODE_ENV = "DDPTRAIN_RUN_LOCK"  # auto (flock, else a lock folder) | folder
HEARTBEAT_S = 10.0
STALE_S = 120.0  # a lock folder whose heartbeat is older than this, on another host, is abandoned
HELD = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


class RunDirInUseError(ConfigError):
    pass


class RunLock:
    """The run directory's lock: `acquire()` or RunDirInUseError naming the holder; `release()`."""

    FILE = ".ddptrain.lock"
    FOLDER = ".ddptrain.lock.d"

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.path = run_dir / self.FILE
        self.handle: Optional[IO[str]] = None
        self.folder_lock: Optional[FolderLock] = None

    def acquire(self) -> RunLock:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if os.environ.get(MODE_ENV, "auto") == "folder":
            self.folder_lock = FolderLock(self.run_dir / self.FOLDER).acquire()
            return self
        handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - stays open: it holds the lock
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = _holder_text(_read_owner(handle))
            handle.close()
            if error.errno in HELD:
                raise in_use(self.run_dir, holder) from None
            log.warning(
                "the file system of %s does not lock files (flock: %s); a lock folder with a heartbeat keeps a second "
                "job out instead (set %s=folder to use it from the start)",
                self.run_dir,
                os.strerror(error.errno or 0),
                MODE_ENV,
            )
            self.folder_lock = FolderLock(self.run_dir / self.FOLDER).acquire()
            return self
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(_owner()) + "\n")
        handle.flush()
        self.handle = handle
        return self

    def release(self) -> None:
        if self.handle is not None:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None
        if self.folder_lock is not None:
            self.folder_lock.release()
            self.folder_lock = None


def in_use(run_dir: Path, holder: str) -> RunDirInUseError:
    return RunDirInUseError(
        f"--out {run_dir} is in use by another job ({holder}); two jobs must not "
        "write one run directory: give this one another --out, or stop the other"
    )


class FolderLock:
    """A lock that needs no `flock`: a folder made with `mkdir` (atomic, also on NFS) holding `owner.json`, whose
    heartbeat a thread renews while the lock is held."""

    def __init__(self, folder: Path):
        self.folder, self.token = folder, uuid.uuid4().hex
        self.stop = threading.Event()
        self.thread: Optional[threading.Thread] = None

    def acquire(self) -> FolderLock:
        for _ in range(2):
            try:
                self.folder.mkdir()
            except FileExistsError:
                owner = _read_owner_file(self.folder / "owner.json")
                why = stale_because(owner, self.folder)
                if why is None:
                    raise in_use(self.folder.parent, _holder_text(owner)) from None
                self._take_over(why)
                continue
            self._beat()
            self.thread = threading.Thread(target=self._keep_beating, name="ddptrain-run-lock", daemon=True)
            self.thread.start()
            return self
        raise in_use(self.folder.parent, "another job took the lock while this one cleared a stale one")

    def _take_over(self, why: str) -> None:
        """Move the stale lock aside (a rename: of two jobs doing this at once, one succeeds), then delete it."""
        aside = self.folder.with_name(f"{self.folder.name}.stale-{self.token}")
        try:
            os.rename(self.folder, aside)
        except OSError:
            return  # someone else moved it first; the next mkdir decides
        log.warning("took over the run directory's lock: %s", why)
        shutil.rmtree(aside, ignore_errors=True)

    def _beat(self) -> None:
        tmp = self.folder / f".owner.{self.token}"
        tmp.write_text(json.dumps({**_owner(), "token": self.token, "beat": time.time()}))
        os.replace(tmp, self.folder / "owner.json")

    def _keep_beating(self) -> None:
        while not self.stop.wait(HEARTBEAT_S):
            try:
                self._beat()
            except OSError:
                pass  # the next beat tries again; a lock this old is only ever declared stale, never lost silently

    def release(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
        owner = _read_owner_file(self.folder / "owner.json")
        if owner.get("token") == self.token:
            shutil.rmtree(self.folder, ignore_errors=True)


def stale_because(owner: Dict, folder: Path) -> Optional[str]:
    """Why the lock folder's owner is gone, or None while it may still run."""
    if not owner:  # just made by another job, owner.json not written yet, or written by a job killed right then
        age = time.time() - _mtime(folder)
        return f"an empty lock folder {age:.0f} s old" if age > STALE_S else None
    if owner.get("host") == socket.gethostname():
        pid = int(owner.get("pid", 0))
        if not pid_alive(pid):
            return f"its holder, pid {pid} on this host, no longer runs"
        return None
    age = time.time() - float(owner.get("beat", 0))
    if age > STALE_S:
        return f"its holder on {owner.get('host', '?')} has not renewed it for {age:.0f} s"
    return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _owner() -> Dict:
    return {"host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}


def _read_owner(handle: IO[str]) -> Dict:
    handle.seek(0)
    try:
        found = json.loads(handle.read() or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _read_owner_file(path: Path) -> Dict:
    try:
        with open(path, encoding="utf-8") as handle:
            return _read_owner(handle)
    except OSError:
        return {}


def _holder_text(info: Dict) -> str:
    if not info:
        return "holder unknown"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["since"])) if "since" in info else "?"
    return f"host {info.get('host', '?')}, pid {info.get('pid', '?')}, since {since}"
