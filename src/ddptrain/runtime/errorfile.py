"""A worker's error report to torchrun's agent, written whole or not at all.

torchrun's `record` writes the failing worker's exception as JSON into the file its agent named
(TORCHELASTIC_ERROR_FILE), opened for writing and filled in place. The agent reads that file as soon as it sees a
worker fail; when it reads one still being written, or one cut short by the signal that stops the other workers,
its JSON parser raises and the launcher ended in a traceback instead of "rank N exited with code 1 [...]". Here the
report goes to a temporary file beside it first and is renamed over the name the agent reads: the agent finds the
whole report or none (then it says the worker's exit code)."""

from __future__ import annotations

import json
import os
import time
import traceback
from typing import Any, Callable


def recorded(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, its exception (if any) reported to torchrun's agent as `record` does, atomically."""
    from torch.distributed.elastic.multiprocessing.errors import record

    return record(function, error_handler=_atomic_handler())


def _atomic_handler():
    from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

    class AtomicErrorHandler(ErrorHandler):
        def record_exception(self, e: BaseException) -> None:
            path = self._get_error_file_path()
            if not path:
                super().record_exception(e)
                return
            write_report(path, e, traceback.format_exc())

    return AtomicErrorHandler()


def write_report(path: str, error: BaseException, callstack: str) -> None:
    """torchrun's error-file JSON for `error` at `path`, renamed into place once written."""
    data = {
        "message": {
            "message": f"{type(error).__name__}: {error}",
            "extraInfo": {"py_callstack": callstack, "timestamp": str(int(time.time()))},
        }
    }
    part = f"{path}.{os.getpid()}.part"
    try:
        with open(part, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(part, path)
    except OSError:
        try:
            os.unlink(part)
        except OSError:
            pass
