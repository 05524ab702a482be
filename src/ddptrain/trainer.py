"""One training worker, from data to checkpoints. Every rank runs all of this; only rank 0 writes."""
from __future__ import annotations

import dataclasses
import logging
import os
import random
import time
from pathlib import Path
from typing import Dict, Optional, Set

import numpy as np
import torch

from . import checkpoint, dist, timing
from .config import Config, save_yaml
from .data.datasets import ImageDataset
from .data.folder import classes_without_validation, load_split, write_split_files
from .data.loaders import auto_workers, eval_loader, train_loader
from .data.transforms import (eval_decode_min_side, eval_transform, train_decode_min_side,
                              train_transform)
from .engine import (EpochPlan, EpochPosition, EpochStats, LrSchedule, StepSettings, build_optimizer,
                     evaluate, resolve_precision, steps_per_epoch, train_one_epoch)
from .errors import CheckpointError, DataError
from .health import Heartbeat, describe, is_peer_failure
from .logs import MetricsLog, TensorBoard, add_log_file, progress, write_json_atomic
from .metrics import EvalResult
from .preempt import Preempted, StopRequest
from .preflight import check_agreement, collect_facts
from .models import (build_model, describe_mismatch, freeze_backbone, head_name, load_weights, place_model,
                     wrap_ddp)

log = logging.getLogger("ddptrain")


def seed_everything(seed: int, epoch: int, rank: int) -> None:
    """Global RNGs (dropout, user code) as a function of (seed, epoch, rank): a resumed epoch draws
    exactly what the uninterrupted run drew, and ranks do not share dropout masks."""
    value = (seed * 1_000_003 + epoch) * 1_000_003 + rank
    torch.manual_seed(value)
    np.random.seed(value % 2**32)
    random.seed(value)


class Trainer:
    def __init__(self, cfg: Config, rt: dist.Runtime, stop: Optional[StopRequest] = None):
        self.cfg = cfg
        self.rt = rt
        self.stop = stop or StopRequest(cfg.dist_timeout)
        self.advice = timing.AdviceOnce()
        self.straggler_history: list = []  # the slowest rank of each epoch so far
        self.run_dir = Path(cfg.out)
        self.failed_files: Set[str] = set()
        self._prepare_run_dir()
        self.cpus = dist.cpus_per_process(rt.env.local_world_size)
        if rt.device.type == "cpu":
            torch.set_num_threads(self.cpus)
        self.split = load_split(cfg.data, cfg.val_split, cfg.seed)
        self._build_loaders()
        self._build_model()
        check_agreement(collect_facts(cfg, self.split, self.steps_per_epoch, self.model), rt.rank, rt.world_size)
        self.precision = resolve_precision(cfg.amp, rt.device)
        self.schedule = LrSchedule(cfg.lr, cfg.epochs, cfg.warmup_epochs, cfg.min_lr_ratio)
        self.start_epoch, self.global_step, self.best_top1 = 0, 0, -1.0
        self.epoch = 0  # the epoch being trained
        self.start_position: Optional[EpochPosition] = None  # set when resuming mid-epoch
        self.resume_rng: Optional[Dict] = None  # this rank's RNG state at that point
        self._maybe_resume()
        self._wrap_ddp()
        self._write_run_files()

    # ---- set-up -------------------------------------------------------------------------------
    def _prepare_run_dir(self) -> None:
        if self.rt.is_main:
            (self.run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
            add_log_file(self.run_dir / "train.log")

    def _build_loaders(self) -> None:
        cfg, rt, split = self.cfg, self.rt, self.split
        self.workers = workers = auto_workers(cfg.workers, self.cpus)
        pin = rt.device.type == "cuda"
        train_set = ImageDataset(split.train, train_transform(cfg.img_size, cfg.min_crop_scale),
                                 train_decode_min_side(cfg.img_size, cfg.min_crop_scale), seed=cfg.seed,
                                 substitute=True)
        val_set = ImageDataset(split.val, eval_transform(cfg.img_size), eval_decode_min_side(cfg.img_size))
        on_cpu = rt.device.type == "cpu"  # then the loader workers normalise, in parallel with the step
        self.train_loader = train_loader(train_set, cfg.batch_size, rt.rank, rt.world_size, cfg.seed, workers, pin,
                                         normalize_in_workers=on_cpu)
        self.val_loader = eval_loader(val_set, cfg.batch_size, rt.rank, rt.world_size, workers, pin,
                                      normalize_in_workers=on_cpu)
        self.steps_per_epoch = steps_per_epoch(len(self.train_loader), cfg.grad_accum)
        if self.steps_per_epoch == 0:
            per_rank = len(self.train_loader.sampler)
            raise DataError(
                f"rank {rt.rank}: {len(split.train)} training images give each of {rt.world_size} processes "
                f"{per_rank} samples, less than one optimizer step of --batch-size {cfg.batch_size} x "
                f"--grad-accum {cfg.grad_accum}; lower the batch size or use fewer processes")
        missing_val = classes_without_validation(split)
        if missing_val and rt.is_main and cfg.val_split > 0:
            log.warning("no validation image for class(es) %s: too few images for --val-split %s; their "
                        "accuracy is not measured", ", ".join(missing_val), cfg.val_split)
        log.info("data: %d classes, %d train / %d val images (%s layout), %d steps per epoch, "
                 "%d loader workers per process", len(split.classes), len(split.train), len(split.val),
                 split.layout, self.steps_per_epoch, workers)

    def _build_model(self) -> None:
        cfg, rt = self.cfg, self.rt
        torch.manual_seed(cfg.seed)  # same initial weights everywhere (DDP also broadcasts rank 0's)
        model = build_model(cfg.model, len(self.split.classes))
        head = head_name(model, len(self.split.classes))
        if cfg.weights:  # a resumed checkpoint overrides these, but a bad path still fails early
            load_weights(model, cfg.weights, head)
        if cfg.freeze_backbone:
            trainable = freeze_backbone(model, head)
            log.info("backbone frozen: %d trainable parameters in '%s'", trainable, head)
        self.model = place_model(model, rt.device, rt.world_size, cfg.sync_bn, cfg.channels_last)
        self.optimizer = build_optimizer(self.model, cfg.optimizer, cfg.lr, cfg.momentum, cfg.weight_decay, rt.device)

    def _maybe_resume(self) -> None:
        path = checkpoint.find_resume(self.cfg.resume, self.run_dir)
        if path is None:
            if self.cfg.resume == "auto":
                log.info("resume auto: no checkpoint in %s, starting fresh", self.run_dir / "checkpoints")
            return
        state = checkpoint.load(path)
        self._check_resumable(path, state)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.precision.scaler is not None and state.get("scaler"):
            self.precision.scaler.load_state_dict(state["scaler"])
        self.start_epoch = int(state["epoch"]) + 1
        self.global_step = int(state["step"])
        self.best_top1 = float(state.get("best_top1", -1.0))
        where = ""
        if state.get("partial"):
            self._resume_mid_epoch(state)
            where = f" after {self.start_position.samples_done} of its samples"
        log.info("resumed from %s: continuing at epoch %d/%d%s (step %d, written by %s processes)",
                 path, self.start_epoch + 1, self.cfg.epochs, where, self.global_step, state.get("world_size"))

    def _resume_mid_epoch(self, state: Dict) -> None:
        partial = state["partial"]
        self.start_epoch = int(partial["epoch"])
        self.start_position = EpochPosition.from_dict(partial["position"])
        if state.get("world_size") == self.rt.world_size:
            self.resume_rng = partial["rng"][self.rt.rank]
        else:
            log.info("mid-epoch resume on %d processes (saved on %s): the rest of the epoch is re-sharded; "
                     "dropout draws differ from an uninterrupted run", self.rt.world_size, state.get("world_size"))

    def _check_resumable(self, path: Path, state: Dict) -> None:
        """A checkpoint of another model or class list is an error that lists the differences."""
        saved = state.get("config", {})
        differences = []
        if state.get("class_names") != self.split.classes:
            differences.append(f"classes {state.get('class_names')} vs {self.split.classes} in {self.cfg.data}")
        if saved.get("model") != self.cfg.model:
            differences.append(f"model {saved.get('model')} vs --model {self.cfg.model}")
        weights = describe_mismatch(state["model"], self.model.state_dict())
        if weights and not differences:
            differences.append(f"weights: {weights}")
        if differences:
            raise CheckpointError(f"rank {self.rt.rank}: cannot resume from {path}: " + "; ".join(differences)
                                  + ". Use another --out (or --resume PATH) for a different model or data.")

    def _wrap_ddp(self) -> None:
        model = self.model
        if self.cfg.compile:
            log.info("compiling the model with torch.compile (the first steps are slow)")
            model = torch.compile(model)
        self.ddp = wrap_ddp(model, self.rt.device, self.cfg.grad_compress)

    def _write_run_files(self) -> None:
        if not self.rt.is_main:
            return
        save_yaml(self.cfg, self.run_dir / "config.yaml")
        write_split_files(self.split, self.run_dir)
        self.metrics = MetricsLog(self.run_dir / "metrics.jsonl")
        self.metrics.truncate_after(self.start_epoch - 1)
        self.tb = TensorBoard(self.run_dir / "tb", self.global_step if self.global_step else None)

    # ---- the loop -----------------------------------------------------------------------------
    def fit(self) -> Optional[EvalResult]:
        cfg, result = self.cfg, None
        last_epoch = cfg.epochs
        if cfg.stop_after_epochs is not None:
            last_epoch = min(cfg.epochs, self.start_epoch + cfg.stop_after_epochs)
        log.info("training %s on %d process(es), %s, amp %s, global batch %d", cfg.model, self.rt.world_size,
                 self.rt.device.type, self.precision.name, cfg.batch_size * cfg.grad_accum * self.rt.world_size)
        for epoch in range(self.start_epoch, last_epoch):
            try:
                result = self._run_epoch(epoch)
            except RuntimeError as error:  # evaluation, saving and barriers have collectives too
                if self.rt.world_size > 1 and is_peer_failure(error):
                    raise describe(Heartbeat(self.rt), error, epoch) from error
                raise
        if self.rt.is_main:
            self.tb.close()
            self._log_finish(last_epoch)
        return result

    def _run_epoch(self, epoch: int) -> EvalResult:
        self.epoch = epoch
        start = self._epoch_start(epoch)
        self.train_loader.sampler.set_epoch(epoch, start.samples_done)  # same shard order on every rank
        steps = steps_per_epoch(len(self.train_loader), self.cfg.grad_accum)
        bar = progress(steps, epoch, self.cfg.epochs, self.rt.is_main)
        reporter = _Reporter(bar, self.tb if self.rt.is_main else None, self.global_step)
        plan = EpochPlan(epoch, self.global_step, start, self._samples_per_epoch(), self.cfg.save_every_steps,
                         self._save_mid_epoch, self.stop)
        stats = train_one_epoch(self.ddp, self.train_loader, self.optimizer, self.schedule, self.precision,
                                self._step_settings(), self.rt, plan, reporter, self._warn_unreadable)
        bar.close()
        self.global_step += stats.steps
        if stats.stopped is not None:  # rank 0 saved the position; every rank leaves together
            self._leave(epoch, stats.stopped)
        dist.broadcast_buffers(checkpoint.unwrap(self.ddp))  # evaluate exactly the model rank 0 saves
        result = evaluate(self.ddp, self.val_loader, self.precision, len(self.split.classes), self.rt,
                          self.cfg.channels_last, self._warn_unreadable)
        if self.rt.is_main:
            self._record_epoch(epoch, stats, result)
        dist.barrier()  # nobody starts the next epoch (or exits) before rank 0 has saved
        if epoch + 1 < self.cfg.epochs and dist.any_rank(self.stop.requested(), self.rt.device):
            self._leave(epoch + 1, None)
        return result

    def _epoch_start(self, epoch: int) -> EpochPosition:
        """Global RNGs and the sample position at which this epoch's training starts."""
        seed_everything(self.cfg.seed, epoch, self.rt.rank)
        if epoch != self.start_epoch or self.start_position is None:
            return EpochPosition()
        if self.resume_rng is not None:
            checkpoint.restore_rng(self.resume_rng)
        return self.start_position

    def _samples_per_epoch(self) -> int:
        return self.steps_per_epoch * self.cfg.grad_accum * self.cfg.batch_size * self.rt.world_size

    def _leave(self, epoch: int, position: Optional[EpochPosition]) -> None:
        dist.barrier()  # rank 0 has written the checkpoint
        where = (f"epoch {epoch + 1} after {position.samples_done} of its samples" if position is not None
                 else f"the start of epoch {epoch + 1}")
        raise Preempted(f"stopped on {self.stop.name}: checkpoint saved in {self.run_dir / 'checkpoints'} at "
                        f"{where} (step {self.global_step}); run the same command with --resume auto to continue")

    def _step_settings(self) -> StepSettings:
        cfg = self.cfg
        return StepSettings(cfg.grad_accum, cfg.clip_grad, cfg.log_every, cfg.channels_last, cfg.label_smoothing)

    def _warn_unreadable(self, failure: str) -> None:
        if failure not in self.failed_files:
            self.failed_files.add(failure)
            log.warning("rank %d: skipped unreadable image %s", self.rt.rank, failure)

    # ---- rank 0 side effects ------------------------------------------------------------------
    def _record_epoch(self, epoch: int, stats: EpochStats, result: EvalResult) -> None:
        record = epoch_record(epoch, self.global_step, self.rt.world_size, stats, result)
        is_best = result.top1 > self.best_top1
        self.best_top1 = max(self.best_top1, result.top1)
        self.metrics.append(record)  # before the checkpoint: a crash in between is redone, not lost
        self.tb.scalars({"val/loss": result.loss, "val/top1": result.top1, "val/top5": result.top5,
                         "perf/images_per_sec": stats.images_per_sec, **perf_scalars(record)}, self.global_step)
        log.info("epoch %d/%d: train_loss %.4f  val_loss %.4f  val_top1 %.4f  val_top5 %.4f  (%d images)  "
                 "%.1f img/s  data_wait %.0f%%  %.1fs", epoch + 1, self.cfg.epochs, stats.train_loss,
                 result.loss, result.top1, result.top5, result.samples, stats.images_per_sec,
                 100 * stats.data_wait_frac, stats.epoch_time_s)
        for message in self.advice.new(timing.advice(stats.ranks, self.workers, self.straggler_history)):
            log.warning("epoch %d: %s", epoch + 1, message)
        skipped = stats.skipped_images + result.skipped
        if skipped:
            log.warning("epoch %d: %d unreadable images skipped (%d train, %d val); see warnings above",
                        epoch + 1, skipped, stats.skipped_images, result.skipped)
        self._save(epoch, record, is_best)
        if is_best:  # the report's confusion matrix and per-class accuracy come from here
            best = {"epoch": epoch, "checkpoint": f"checkpoints/{checkpoint.BEST}",
                    **result.to_dict(self.split.classes)}
            write_json_atomic(self.run_dir / BEST_EVAL, best)

    def _save(self, epoch: int, record: Dict, is_best: bool) -> None:
        state = self._state(last_complete_epoch=epoch)
        state["metrics"] = record
        folder = self.run_dir / "checkpoints"
        checkpoint.save_atomic(state, folder / checkpoint.LAST)
        if is_best:
            checkpoint.save_atomic(state, folder / checkpoint.BEST)

    def _save_mid_epoch(self, position: EpochPosition, global_step: int) -> None:
        """Every rank hands over its RNG state; rank 0 writes step-N.pt (and last.pt)."""
        rng = dist.gather_objects(checkpoint.capture_rng())
        if not self.rt.is_main:
            return
        epoch = self.epoch
        state = self._state(last_complete_epoch=epoch - 1, step=global_step)
        state["partial"] = {"epoch": epoch, "position": position.to_dict(), "rng": rng}
        path = checkpoint.save_step(state, self.run_dir / "checkpoints", global_step, self.cfg.keep_last)
        log.info("saved %s (epoch %d, %d samples into it)", path.name, epoch + 1, position.samples_done)

    def _state(self, last_complete_epoch: int, step: Optional[int] = None) -> Dict:
        return {
            "format": checkpoint.FORMAT_VERSION,
            "model": checkpoint.unwrap(self.ddp).state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.schedule.state_dict(),
            "scaler": self.precision.scaler.state_dict() if self.precision.scaler else None,
            "epoch": last_complete_epoch,
            "step": self.global_step if step is None else step,
            "best_top1": self.best_top1,
            "rng": checkpoint.capture_rng(),
            "config": self.cfg.to_dict(),
            "class_names": list(self.split.classes),
            "world_size": self.rt.world_size,
        }

    def _log_finish(self, last_epoch: int) -> None:
        if last_epoch < self.cfg.epochs:
            log.info("stopped after epoch %d of %d as asked; continue with --resume auto", last_epoch, self.cfg.epochs)
        log.info("done: best val_top1 %.4f; run dir %s", self.best_top1, self.run_dir)


BEST_EVAL = "best_eval.json"


def epoch_record(epoch: int, step: int, world_size: int, stats: EpochStats, result: EvalResult) -> Dict:
    record = {
        "epoch": epoch, "step": step, "train_loss": stats.train_loss, "val_loss": result.loss,
        "val_top1": result.top1, "val_top5": result.top5, "val_samples": result.samples,
        "lr": stats.lr, "images_per_sec": stats.images_per_sec, "epoch_time_s": stats.epoch_time_s,
        "data_wait_frac": stats.data_wait_frac, "skipped_images": stats.skipped_images + result.skipped,
        "world_size": world_size, "time": time.time(),
    }
    if stats.ranks:
        record.update(timing.summarize(stats.ranks))
    return record


def perf_scalars(record: Dict) -> Dict[str, float]:
    """The step-time breakdown as TensorBoard scalars (perf/...)."""
    scalars = {f"perf/{key}": record[key] for key in ("data_wait_frac", "step_time_s", "step_time_spread",
                                                       "max_mem_mb", "gpu_util") if key in record}
    for rank, seconds in enumerate(record.get("rank_work_s", [])):
        scalars[f"perf/rank{rank}_work_s"] = seconds
    return scalars


class _Reporter:
    """Progress bar and TensorBoard points during an epoch (rank 0; a disabled bar elsewhere)."""

    def __init__(self, bar, tb: Optional[TensorBoard], step_offset: int):
        self.bar, self.tb, self.step_offset, self.shown = bar, tb, step_offset, 0

    def __call__(self, steps_done: int, loss: float, lr: float, images_per_sec: float) -> None:
        self.bar.update(steps_done - self.shown)
        self.shown = steps_done
        self.bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.3g}", img_s=f"{images_per_sec:.0f}")
        if self.tb is not None:
            self.tb.scalars({"train/loss": loss, "lr": lr}, self.step_offset + steps_done)


def resume_after_restart(cfg: Config, environ=os.environ) -> Config:
    """Workers restarted by torchrun (--max-restarts) continue from the newest checkpoint."""
    restarts = int(environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)
    if restarts > 0 and not cfg.resume:
        log.warning("restart %d after a worker failure: resuming from the last checkpoint", restarts)
        return dataclasses.replace(cfg, resume="auto")
    return cfg


def run(cfg: Config, env: dist.DistEnv) -> Optional[EvalResult]:
    cfg = resume_after_restart(cfg)
    stop = StopRequest(cfg.dist_timeout).install()  # from here on SIGTERM/SIGUSR1 mean "save and stop"
    try:
        rt = dist.setup(env, cfg.device, cfg.dist_timeout)
        try:
            return Trainer(cfg, rt, stop).fit()
        finally:
            dist.cleanup()
    finally:
        stop.uninstall()
