"""One training job in this process: what a (re)started worker continues — after a restart torchrun counted, or an
elastic re-formation it did not — the stop request (signals), the process group, and the trainer."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from ..config import Config
from ..runtime import dist
from ..runtime.env import DistEnv, restart_count
from ..runtime.heartbeat import close_heartbeat
from ..runtime.preempt import StopRequest
from ..runtime.startup import StartupClock
from . import rundir
from .metrics import EvalResult
from .sinks import ReportWriter

log = logging.getLogger("ddptrain")


def continue_elastic_job(cfg: Config, rt: dist.Runtime) -> Config:
    """The workers of an elastic job that re-formed (a node joined or left) continue its run: rank 0 reads the run
    directory's marker and every rank follows its answer, so none starts afresh, and none wipes it (--overwrite)."""
    job = rundir.job_id(cfg)
    if job is None or cfg.run.resume:
        return cfg
    continues = dist.broadcast_object(rundir.elastic_continues(Path(cfg.run.out), job) if rt.is_main else None)
    if not continues:
        return cfg
    if rt.is_main:
        log.warning(
            "elastic job %r re-formed: its workers continue the run in %s from the newest checkpoint%s",
            job,
            cfg.run.out,
            " (--overwrite applies to the job's first start only)" if cfg.run.overwrite else "",
        )
    return cfg.replace(resume="auto", overwrite=False)


def resume_after_restart(cfg: Config, restarts: int) -> Config:
    """Workers restarted by torchrun (--max-restarts) continue from the newest checkpoint."""
    if restarts > 0 and not cfg.run.resume:
        log.warning("restart %d after a worker failure: resuming from the last checkpoint", restarts)
        return cfg.replace(resume="auto", overwrite=False)  # --overwrite means the first attempt only
    return cfg


def run(
    cfg: Config, env: DistEnv, clock: Optional[StartupClock] = None, report: Optional[ReportWriter] = None
) -> Optional[EvalResult]:
    """`report`: writes `ddptrain report`'s figures for the --log-to trackers that take files (see sinks.py)."""
    cfg = resume_after_restart(cfg, restart_count())
    clock = clock or StartupClock()
    stop = StopRequest(cfg.launch.dist_timeout).install()  # from here on SIGTERM/SIGUSR1 mean "save and stop"
    try:
        rt = dist.setup(env, cfg.launch.device, cfg.launch.dist_timeout)
        clock.mark("process group")
        try:
            cfg = continue_elastic_job(cfg, rt)
            from .trainer import Trainer  # the trainer imports torch's models: only when a job runs

            return Trainer(cfg, rt, stop, clock, report).fit()
        finally:
            close_heartbeat(rt)
            dist.cleanup()
    finally:
        stop.uninstall()
