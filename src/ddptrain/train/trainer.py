"""One training worker, from data to checkpoints. Every rank runs all of this; only rank 0's sinks and
checkpointer write files (the others hold ones that do nothing)."""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import random
from pathlib import Path
from typing import Any, Dict, Optional, cast

import numpy as np
import torch

from ..config import Config, DataConfig
from ..config.files import as_recorded
from ..data.balance import loss_weights, sample_weights
from ..data.datasets import UnreadableFiles
from ..data.images import ImageLimits
from ..data.loaders import (
    GPU_DECODE_BELOW_WORKERS,
    LoaderSettings,
    auto_workers,
    choose_decode,
    evaluation_images,
    start_workers,
    stop_workers,
    training_images,
)
from ..data.presize import recorded_side
from ..data.samplers import EpochSampler
from ..data.sources import Reading, load_split
from ..data.split import Split, run_split, split_summary, unvalidated_classes
from ..data.transforms import Augment, Preprocess
from ..errors import DataError, NonFiniteLossError, WeightsError
from ..models import (
    build_configured,
    build_pretrained,
    compile_model,
    fetch,
    freeze_backbone,
    head_name,
    load_weights,
    place_model,
    read_model_weights,
    unwrap,
    wrap_ddp,
)
from ..models.fsdp import return_freed_memory, shard_model
from ..models.gradckpt import enable_grad_checkpointing
from ..runtime import dist
from ..runtime.env import cpus_per_process
from ..runtime.heartbeat import is_peer_failure, naming_stalled_peers
from ..runtime.preempt import Preempted, StopRequest
from ..runtime.preflight import check_agreement, weights_checksum
from ..runtime.startup import StartupClock
from ..util import counted, mix_seed
from . import rundir
from .autobatch import AUTO, batch_for_the_data, find_batch_size
from .checkpointer import Checkpointer
from .ema import build_ema
from .evaluate import evaluate
from .loop import EpochPlan, EpochStats, Reduced, Stepped, StepSettings, steps_per_epoch, train_epoch
from .metrics import EvalResult, improves, metric_value
from .mixing import Mixing
from .optim import (
    LrSchedule,
    build_optimizer,
    peak_lr,
)
from .precision import resolve_precision
from .progress import EpochPlace
from .sharded import live_tensors
from .sinks import ReportWriter, epoch_record, open_sinks
from .state import (
    EpochPosition,
    PartialEpoch,
    TrainState,
    capture_rng,
    non_finite_entries,
    restore_rng,
)

log = logging.getLogger("ddptrain")
PARTIAL_SHARE_SAID = 0.1  # a process's images left out of each epoch by its last partial batch: said from this share


def seed_everything(seed: int, epoch: int, rank: int) -> None:
    """Global RNGs (dropout, user code) as a function of (seed, epoch, rank): a resumed epoch draws
    exactly what the uninterrupted run drew, and ranks do not share dropout masks."""
    value = mix_seed(seed, epoch, rank)
    torch.manual_seed(value)
    np.random.seed(value % 2**32)
    random.seed(value)


class Trainer:
    def __init__(
        self,
        cfg: Config,
        rt: dist.Runtime,
        stop: Optional[StopRequest] = None,
        clock: Optional[StartupClock] = None,
        report: Optional[ReportWriter] = None,
    ):
        self.cfg, self.rt = cfg, rt
        self.stop = stop or StopRequest(cfg.launch.dist_timeout)
        self.clock = clock or StartupClock()
        self.run_dir = Path(cfg.run.out)
        # Rank 0 owns the run directory for the whole run: the lock first, before anything is written there.
        self.run_lock = self._claim_run_dir() if rt.is_main else None
        self.sinks = open_sinks(self.run_dir, cfg.optim.epochs, rt.is_main, report, cfg.run.progress_every)
        try:
            self._set_up(cfg)
        except BaseException as error:  # the run folder says so: train.log holds the error, the marker the end
            self._close(error, more_epochs=False)
            raise

    def _set_up(self, cfg: Config) -> None:
        rt = self.rt
        self.checkpointer = Checkpointer(self.run_dir, cfg.run.keep_last, rt.is_main, cfg.model.strategy == "fsdp")
        # read before anything is built: a resume keeps its preprocessing and its global batch
        beginning = self.checkpointer.resume_from(cfg.run.resume)
        self.requested, self.cfg = beginning.configure(cfg, rt.world_size, say=rt.is_main)  # as given / as trained
        self.requested = as_recorded(self.requested)  # its local paths absolute, for use from any folder
        self.saved = beginning.saved
        cfg = self.cfg
        self.preprocess = Preprocess.of(cfg.data)
        self.unreadable = UnreadableFiles()
        self.cpus = cpus_per_process(rt.env.local_world_size)
        if rt.device.type == "cpu":
            torch.set_num_threads(self.cpus)
        self.split = self._load_split()
        self._record_presized()
        self._record_split_made_with()
        self._say_val_split_unused()
        self.precision = resolve_precision(cfg.optim.amp, rt.device)
        self._build_model()
        self.clock.mark("model")
        self._resolve_batch_size()
        self._build_loaders()
        self.clock.mark("data")
        check_agreement(self._preflight_facts(), rt.rank, rt.world_size)
        self.clock.mark("preflight")
        self.schedule = self._build_schedule()
        self.start = beginning.restore(
            self.model, self.optimizer, self.precision.scaler, self.ema, self.split.classes, rt
        )
        self.global_step, self.best, self.since_best = (
            self.start.global_step,
            self.start.best,
            self.start.since_best,
        )
        self._wrap_ddp()
        self.checkpointer.attach(self._checkpoint_tensors)
        self.sinks.write_run_files(self.requested, self.split)
        self.sinks.start(self.start.epoch - 1, self.global_step, self.requested, resumed=self.start.resumed)
        self.clock.mark("resume and DDP")

    def _close(self, failure: Optional[BaseException], more_epochs: bool) -> None:
        """The loaders' workers stopped, the outputs closed (train.log given the error), the run folder's marker
        told how the run ended, its lock released: after training, or after a set-up that failed."""
        for loader in (getattr(self, "train_loader", None), getattr(self, "val_loader", None)):
            if loader is not None:
                stop_workers(loader)
        self.sinks.close(failure)
        if self.run_lock is not None:
            rundir.record_end(self.run_dir, rundir.ending(failure, more_epochs), getattr(self, "global_step", 0))
            self.run_lock.release()

    # ---- set-up -------------------------------------------------------------------------------
    def _claim_run_dir(self) -> rundir.RunLock:
        cfg = self.cfg
        rundir.check_apart("--out", self.run_dir, "--data", cfg.data.folder())
        return rundir.claim(self.run_dir, cfg.run.resume, cfg.run.overwrite, rundir.job_id(cfg))

    def _load_split(self) -> Split:
        """Rank 0 lists the data once and every rank gets its result (compact arrays): N ranks do not list
        a network file system N times. An error there is raised on every rank."""
        return dist.computed_on_main(self.rt, self._list_data, "while listing the data")

    def _record_presized(self) -> None:
        """A shard set made with `ddptrain shard --max-side N`: N goes into config.yaml and the checkpoints."""
        side = recorded_side(self.split.made_with, self.cfg.data.data_max_side, self.cfg.data.folder())
        if side is not None:
            self.cfg.data.data_max_side = self.requested.data.data_max_side = side
            if self.rt.is_main:
                log.info("data: shards pre-sized to a longest side of %d px", side)

    def _say_val_split_unused(self) -> None:
        """--val-split given to data that splits itself (train/ and val/, a split column, its own validation
        part): said, not silently ignored (the default is not said: it was not typed)."""
        given = self.cfg.data.val_split
        if self.split.by_data and given != DataConfig().val_split and self.rt.is_main:
            log.warning(
                "--val-split %g is not used: %s gives its own split (%s layout)",
                given,
                self.split.source,
                self.split.layout,
            )

    def _record_split_made_with(self) -> None:
        """config.yaml and the checkpoints record the --val-split of the split the run trains on: a shard set's own,
        or the run's own when it is read back on resume. Another value on the command line moves no image: said."""
        made = self.split.made_with.get("val_split")
        if made is None or made == self.cfg.data.val_split:
            return
        if self.rt.is_main:
            log.info(
                "data: the split trained on was made with --val-split %g (%s); this command's %g moves no image and "
                "the run records %g",
                made,
                "the shard set's" if self.split.fixed else "this run's own, read back",
                self.cfg.data.val_split,
                made,
            )
        self.cfg.data.val_split = self.requested.data.val_split = made

    @functools.cached_property
    def split_info(self) -> Dict[str, Any]:
        """The split's summary that checkpoints keep (computed once, when the first one is written)."""
        return split_summary(self.split)

    def _list_data(self) -> Split:
        """A fresh run splits the data; a resumed one reads its own split back from RUN_DIR/splits, so images added
        to the data since cannot move between training and validation (a shard set's split is fixed)."""
        data = self.cfg.data
        listed = load_split(data.folder(), data.val_split, self.cfg.optim.seed, Reading.of(data))
        own_split = self.run_dir if self.cfg.run.resume else None
        split, read_back = run_split(listed, own_split, "training and validation", say=self.rt.is_main)
        if read_back:
            log.info(
                "resume: train/val split read back from %s (%d train, %d val images)",
                self.run_dir / "splits",
                len(split.train),
                len(split.val),
            )
            if self.saved is not None:
                split.made_with = {**split.made_with, "val_split": self.saved.data.val_split}
        return split

    def _choose_decode(self) -> str:
        """Where this run's JPEGs are decoded (`--decode`, with auto resolved for this device and its workers)."""
        data = self.cfg.data
        augments_on_cpu = data.auto_augment is not None or data.random_erasing > 0
        return choose_decode(data.decode, self.rt.device, self.workers, augments_on_cpu)

    def _refuse_an_epoch_without_a_step(self) -> None:
        """Too few training images for one optimizer step per process: said in one line, on every rank."""
        optim, world = self.cfg.optim, self.rt.world_size
        images = len(self.split.train)
        if world == 1:
            share = "is" if images == 1 else "are"
        else:
            share = f"give each of {world} processes {counted(len(self.train_sampler), 'sample')},"
        raise DataError(
            f"{counted(images, 'training image')} {share} less than one optimizer step of --batch-size "
            f"{optim.batch_size} x --grad-accum {optim.grad_accum}; lower the batch size"
            f"{'' if world == 1 else ' or use fewer processes'}",
            rank=self.rt.rank,
            every_rank=True,
        )

    def _build_loaders(self) -> None:
        cfg, rt, split = self.cfg, self.rt, self.split
        self.workers = auto_workers(cfg.data.workers, self.cpus)
        self.decode = self._choose_decode()
        settings = LoaderSettings.for_device(rt.device, cfg.optim.batch_size, self.workers, self.decode)
        limits = ImageLimits.of(cfg.data)
        self.train_loader = training_images(
            split.train,
            self.preprocess,
            cfg.data.min_crop_scale,
            cfg.optim.seed,
            rt.rank,
            rt.world_size,
            settings,
            limits,
            Augment.of(cfg.data),
            sample_weights(split.train, len(split.classes)) if cfg.data.sampler == "balanced" else None,
        )
        self.train_sampler = cast(EpochSampler, self.train_loader.sampler)
        self.loss_weights = loss_weights(cfg.optim.class_weights, split, rt.device, say=rt.is_main)
        self._warn_repeats_per_process()
        self.val_loader = evaluation_images(split.val, self.preprocess, rt.rank, rt.world_size, settings, limits=limits)
        self.steps_per_epoch = steps_per_epoch(len(self.train_loader), cfg.optim.grad_accum)
        if self.steps_per_epoch == 0:
            self._refuse_an_epoch_without_a_step()
        if rt.is_main:
            self._say_partial_batches()
        self.validates = len(split.val) > 0
        if self.validates:
            start_workers(self.val_loader)  # before the run's threads start
        else:
            self._train_only()
        unmeasured = unvalidated_classes(split, cfg.data.val_split)
        if unmeasured and rt.is_main and self.validates:
            log.warning("%s", unmeasured)
        log.info(
            "data: %s, %d train / %d val images (%s layout), %s per epoch, %s per process",
            counted(len(split.classes), "class"),
            len(split.train),
            len(split.val),
            split.layout,
            counted(self.steps_per_epoch, "step"),
            counted(self.workers, "loader worker"),
        )
        if self.decode == "gpu":
            log.info(
                "JPEGs are decoded and cropped on the GPU with nvJPEG (%s)",
                "--decode gpu"
                if self.cfg.data.decode == "gpu"
                else f"--decode auto: {counted(self.workers, 'loader worker')} per process, "
                f"fewer than {GPU_DECODE_BELOW_WORKERS}; --decode cpu to decode in the workers",
            )

    def _train_only(self) -> None:
        """No validation images (--val-split 0, or a manifest whose rows are all `train`): an explicit mode, said
        once. Nothing is evaluated, so nothing can be "best": best.pt is not written and last.pt is the result."""
        if self.cfg.optim.patience is not None:
            raise DataError(
                f"--patience {self.cfg.optim.patience} needs validation images, and {self.cfg.data.folder()} gives none "
                "(--val-split 0?); give a --val-split above 0, or drop --patience",
                rank=self.rt.rank,
                every_rank=True,
            )
        if self.rt.is_main:
            log.warning(
                "no validation images (--val-split %g): training only — nothing is evaluated, best.pt is not "
                "written, checkpoints/last.pt holds the result",
                self.cfg.data.val_split,
            )

    def _build_model(self) -> None:
        cfg, rt, classes = self.cfg, self.rt, len(self.split.classes)
        torch.manual_seed(cfg.optim.seed)  # same initial weights everywhere (DDP also broadcasts rank 0's)
        if cfg.model.pretrained:  # not when resuming (Resume.configure): the checkpoint has the weights
            self._fetch_once_per_node(cfg.model.name)
            report = log.info if rt.is_main else log.debug
            model = build_pretrained(cfg.model, classes, report, self.preprocess.img_size)
        else:
            model = build_configured(cfg.model, classes, self.preprocess.img_size)
        head = head_name(model, classes, cfg.model.head)
        if cfg.model.weights:  # a resumed checkpoint overrides these, but a bad path still fails early
            load_weights(model, read_model_weights(cfg.model.weights), head, cfg.model.weights)
        if cfg.model.freeze_backbone:
            trainable = freeze_backbone(model, head)
            log.info("backbone frozen: %d trainable parameters in '%s'", trainable, head)
        self.model = place_model(model, rt.device, rt.world_size, cfg.model.sync_bn, cfg.model.channels_last)
        if cfg.model.grad_checkpointing:
            log.info("gradient checkpointing: %s", enable_grad_checkpointing(self.model))
        self.initial = {  # before any sharding: what the ranks compare in the preflight
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "initial_weights": weights_checksum(self.model),
        }
        self.ema = self._build_ema()
        if cfg.model.strategy == "fsdp":
            self._shard()
        optim = cfg.optim
        self.optimizer = build_optimizer(
            self.model, optim.optimizer, optim.lr, optim.momentum, optim.weight_decay, rt.device, optim.layer_decay
        )

    def _resolve_batch_size(self) -> None:
        """--batch-size auto on a fresh run: the largest that fits, tried before the loaders are made; recorded in
        config.yaml and the checkpoints (a resumed run keeps its recorded batch: `Resume.configure`)."""
        if self.cfg.optim.batch_size != AUTO:
            return
        found = find_batch_size(
            self.model,
            self.optimizer,
            self.precision,
            self.rt,
            self.preprocess.img_size,
            len(self.split.classes),
            self.cfg.model.strategy,
            most=batch_for_the_data(len(self.split.train), self.rt.world_size, self.cfg.optim.grad_accum),
        )
        self.cfg.optim.batch_size = self.requested.optim.batch_size = found

    def _say_partial_batches(self) -> None:
        """Each process leaves its last partial batch out of an epoch (equal, full batches on every rank): with
        little data that is much of it, said with a batch size that leaves nothing out."""
        per_process, batch = len(self.train_sampler), self.cfg.optim.batch_size
        trained = len(self.train_loader) * batch
        if per_process - trained < PARTIAL_SHARE_SAID * per_process:
            return
        whole = max(b for b in range(1, batch + 1) if per_process % b == 0)
        log.warning(
            "each epoch trains on %d of each process's %d training images: the last partial batch of --batch-size "
            "%d is left out (other images each epoch)%s",
            trained,
            per_process,
            batch,
            f"; --batch-size {whole} leaves none out" if whole > batch // 2 else "",
        )

    def _warn_repeats_per_process(self) -> None:
        if self.cfg.data.repeated_aug > self.rt.world_size and self.rt.is_main:
            log.warning(
                "--repeated-aug %d on %s: some copies of an image land in the same process's batch; "
                "use at most one copy per process",
                self.cfg.data.repeated_aug,
                counted(self.rt.world_size, "process"),
            )

    def _fetch_once_per_node(self, name: str) -> None:
        """One process per node downloads what the weights cache lacks; the others wait for it."""
        if self.rt.env.local_rank == 0:
            fetch(name)
        try:
            dist.barrier()
        except RuntimeError as error:
            if not is_peer_failure(error):
                raise
            fetcher = self.rt.rank - self.rt.env.local_rank
            raise WeightsError(  # the two errors reach the console in either order
                f"rank {fetcher}, which fetches the pretrained weights of {name} for this node, stopped; "
                f"rank {fetcher}'s error says why",
                rank=self.rt.rank,
            ) from None

    def _preflight_facts(self) -> Dict[str, Any]:
        """What every rank must agree on before the first step (node-local options left out)."""
        split = self.split
        return {
            "config": self.cfg.shared_values(),
            **self._node_view(),
            "train_images": len(split.train),
            "val_images": len(split.val),
            "train_files": split.train.digest(),
            "steps_per_epoch": self.steps_per_epoch,
            **self.initial,
            "torch": torch.__version__,
        }

    def _node_view(self) -> Dict[str, Any]:
        """The classes, and how many images of the shared list are missing, as this node sees its own --data: one
        process per node other than rank 0's lists it (rank 0's listing is the one shared), so nodes that mount
        different data stop before the first step instead of training on files some of them lack."""
        split = self.split
        if self.rt.env.local_rank != 0 or self.rt.is_main or split.fixed:
            return {"classes": list(split.classes), "images of the shared list missing on this node": 0}
        own = load_split(
            self.cfg.data.folder(), self.cfg.data.val_split, self.cfg.optim.seed, Reading.of(self.cfg.data)
        )
        listed = {part.relative(i) for part in (own.train, own.val) for i in range(len(part))}
        missing = sum(part.relative(i) not in listed for part in (split.train, split.val) for i in range(len(part)))
        return {"classes": list(own.classes), "images of the shared list missing on this node": missing}

    def _build_schedule(self) -> LrSchedule:
        optim = self.cfg.optim
        lr = peak_lr(optim, self.global_batch)
        if optim.lr_base is not None and self.rt.is_main:
            log.info("learning rate %.6g: --lr-base %g x global batch %d / 256", lr, optim.lr_base, self.global_batch)
        return LrSchedule(
            lr,
            optim.epochs,
            optim.warmup_epochs,
            optim.min_lr_ratio,
            optim.schedule,
            optim.decay_epochs,
            optim.decay_rate,
        )

    def _shard(self) -> None:
        """--strategy fsdp: the model (and its EMA copy) sharded over the processes, before the optimizer is built
        on the shards."""
        model_cfg = self.cfg.model
        if self.rt.device.type == "cpu" and return_freed_memory():
            log.debug("fsdp on CPU: freed blocks go back to the system (a fixed mmap threshold)")
        for module in [self.model] + ([self.ema.module] if self.ema is not None else []):
            blocks = shard_model(
                module, self.rt.device, self.precision.dtype, model_cfg.reshard_after_forward, model_cfg.fsdp_offload
            )
        log.info(
            "fsdp: %s sharded over %s in %d blocks and the root%s",
            model_cfg.name,
            counted(self.rt.world_size, "process"),
            blocks,
            f", parameters gathered as {self.precision.name}, gradients reduced in float32"
            if self.precision.dtype is not None
            else "",
        )

    def _wrap_ddp(self) -> None:
        """DDP around the model (the FSDP-sharded model needs no wrapper), after torch.compile."""
        model = self.model
        if self.cfg.model.compile:
            log.info("compiling the model with torch.compile (the first steps are slow)")
            model = compile_model(model)
        if self.cfg.model.strategy == "fsdp":
            self.ddp = model
            return
        self.ddp = wrap_ddp(model, self.rt.device, self.cfg.model.grad_compress)

    def _build_ema(self) -> Optional[Any]:
        """--ema-decay: timm's ModelEmaV3 of the model's weights (a resume then loads the saved average into it)."""
        optim = self.cfg.optim
        if not optim.ema_decay:
            return None
        return build_ema(self.model, optim.ema_decay, optim.ema_warmup)

    # ---- the loop -----------------------------------------------------------------------------
    def fit(self) -> Optional[EvalResult]:
        cfg, result = self.cfg, None
        last_epoch = cfg.optim.epochs
        if cfg.run.stop_after_epochs is not None:
            last_epoch = min(cfg.optim.epochs, self.start.epoch + cfg.run.stop_after_epochs)
        log.info(
            "training %s on %s, %s, amp %s, global batch %d",
            cfg.model.name,
            counted(self.rt.world_size, "process"),
            self.rt.device.type,
            self.precision.name,
            self.global_batch,
        )
        failure: Optional[BaseException] = None  # tells the trackers how the run ended
        try:
            for epoch in range(self.start.epoch, last_epoch):
                if self._patience_spent(epoch):  # also a resumed run that had stopped early
                    break
                with naming_stalled_peers(self.rt, epoch):  # evaluation, saving and barriers have collectives too
                    result = self._run_epoch(epoch) or result
        except BaseException as error:
            failure = error
            raise
        finally:
            self._close(failure, last_epoch < cfg.optim.epochs)
        if last_epoch < cfg.optim.epochs:
            log.info("stopped after epoch %d of %d as asked; continue with --resume auto", last_epoch, cfg.optim.epochs)
        if self.validates:
            log.info("done: best val_%s %.4f; run dir %s", cfg.optim.eval_metric, self.best or 0.0, self.run_dir)
        else:
            log.info("done: trained without validation; the result is %s", self.checkpointer.last)
        return result

    def _evaluate(self, model, what: str = "validation") -> EvalResult:
        return evaluate(
            model,
            self.val_loader,
            self.precision,
            len(self.split.classes),
            self.rt,
            self.cfg.model.channels_last,
            self.unreadable,
            self.cfg.optim.threshold if self.cfg.data.task == "multilabel" else None,
            self.preprocess.img_size,
            self.cfg.run.progress_every,
            what,
        )

    def _patience_spent(self, epoch: int) -> bool:
        """--patience: the --eval-metric has not improved for that many evaluations in a row. Every rank decides
        alike (the evaluation is all-reduced), at the same epoch end."""
        patience = self.cfg.optim.patience
        if patience is None or self.since_best < patience:
            return False
        log.info(
            "early stop before epoch %d of %d: val_%s has not improved for %s (--patience %d); best %.4f is in %s",
            epoch + 1,
            self.cfg.optim.epochs,
            self.cfg.optim.eval_metric,
            counted(self.since_best, "evaluation"),
            patience,
            self.best or 0.0,
            self.checkpointer.best,
        )
        return True

    def _evaluates(self, epoch: int) -> bool:
        """--eval-every N: after every N-th epoch, and after the last (never without validation images)."""
        if not self.validates:
            return False
        return (epoch + 1) % self.cfg.run.eval_every == 0 or epoch + 1 == self.cfg.optim.epochs

    def _run_epoch(self, epoch: int) -> Optional[EvalResult]:
        stats = self._train(epoch)
        self.global_step += stats.steps
        if stats.stopped is not None:  # rank 0 saved the position; every rank leaves together
            self._leave(epoch, stats.stopped)
        dist.broadcast_buffers(unwrap(self.ddp))  # evaluate exactly the model rank 0 saves
        result = ema_result = None
        if self._evaluates(epoch):
            result = self._evaluate(self.ddp)
            if self.ema is not None:
                dist.broadcast_buffers(self.ema.module)  # each rank averaged its own BatchNorm statistics
                ema_result = self._evaluate(self.ema.module, "validation of the EMA weights")
        self._refuse_non_finite(epoch, result.loss if result is not None else None)
        self._record_epoch(epoch, stats, result, ema_result)
        dist.barrier()  # nobody starts the next epoch (or exits) before rank 0 has saved
        if epoch + 1 < self.cfg.optim.epochs and dist.any_rank(self.stop.requested(), self.rt.device):
            self._leave(epoch + 1, None)
        return result

    def _train(self, epoch: int) -> EpochStats:
        """The epoch's steps, and what happens between them: the EMA after each step, the start-up line after the
        run's first, progress at each reduction, a mid-epoch checkpoint when one is due or the ranks stop."""
        start = self._epoch_start(epoch)
        self.train_sampler.set_epoch(epoch, start.samples_done, start.lanes)  # same order on every rank
        start.lanes = self.train_sampler.lanes  # a resume on another number of processes keeps the epoch's order
        plan = EpochPlan(
            epoch,
            self.global_step,
            start,
            self.global_batch,
            self._samples_per_epoch(),
            self.cfg.run.save_every_steps,
            stop=self.stop,
        )
        steps = train_epoch(
            self.ddp,
            self.train_loader,
            self.optimizer,
            self.schedule,
            self.precision,
            self._step_settings(),
            self.rt,
            plan,
        )
        progress = self.sinks.epoch_progress(
            EpochPlace(
                epoch,
                self.cfg.optim.epochs,
                self.steps_per_epoch,
                start.samples_done // max(self.global_batch, 1),
                self.global_step,
                self.global_batch,
            )
        )
        stats: Optional[EpochStats] = None
        for event in steps:
            if isinstance(event, Stepped):
                self.unreadable(event.failures)
                if self.ema is not None:
                    self.ema.update(unwrap(self.ddp), step=event.global_step)
                if event.first and epoch == self.start.epoch:
                    self._first_step_done()
                progress.step(event.global_step, event.data_wait_frac)
            elif isinstance(event, Reduced):
                progress(event.steps_done, event.loss, event.lr, event.images_per_sec)
                if event.save:
                    self._save_mid_epoch(epoch, event.position, event.global_step)
            else:
                stats = event.stats
        progress.close()
        assert stats is not None  # train_epoch always ends with Finished
        return stats

    def _epoch_start(self, epoch: int) -> EpochPosition:
        """Global RNGs and the sample position at which this epoch's training starts."""
        seed_everything(self.cfg.optim.seed, epoch, self.rt.rank)
        if epoch != self.start.epoch or self.start.position is None:
            return EpochPosition()
        if self.start.rng is not None:
            restore_rng(self.start.rng)
        return dataclasses.replace(self.start.position)

    def _first_step_done(self) -> None:
        """After the run's first optimizer step: collectives now wait --dist-timeout, not the start-up allowance (a
        stalled peer fails fast), and the start-up breakdown is said."""
        self.rt.use_steady_timeout()
        self.clock.mark("first step")
        self.sinks.startup(self.clock)

    @property
    def global_batch(self) -> int:
        """Images per optimizer step over all processes."""
        optim = self.cfg.optim
        return optim.batch_size * optim.grad_accum * self.rt.world_size

    def _samples_per_epoch(self) -> int:
        return self.steps_per_epoch * self.global_batch

    def _leave(self, epoch: int, position: Optional[EpochPosition]) -> None:
        dist.barrier()  # rank 0 has written the checkpoint
        where = (
            f"epoch {epoch + 1} after {position.samples_done} of its samples"
            if position is not None
            else f"the start of epoch {epoch + 1}"
        )
        raise Preempted(
            f"stopped on {self.stop.name}: checkpoint saved in {self.checkpointer.folder} at "
            f"{where} (step {self.global_step}); run the same command with --resume auto to continue"
        )

    def _step_settings(self) -> StepSettings:
        cfg = self.cfg
        mixing = Mixing(
            cfg.data.mixup, cfg.data.cutmix, len(self.split.classes), cfg.optim.label_smoothing, cfg.optim.seed
        )
        return StepSettings(
            cfg.optim.grad_accum,
            cfg.optim.clip_grad,
            cfg.run.log_every,
            cfg.model.channels_last,
            cfg.optim.label_smoothing,
            mixing if mixing.active else None,
            self.loss_weights,
        )

    # ---- what is kept -------------------------------------------------------------------------
    def _record_epoch(
        self, epoch: int, stats: EpochStats, result: Optional[EvalResult], ema: Optional[EvalResult] = None
    ) -> None:
        record = epoch_record(epoch, self.global_step, self.rt.world_size, self.global_batch, stats, result, ema)
        metric = self.cfg.optim.eval_metric
        # the same on every rank: the evaluation is all-reduced
        is_best = result is not None and improves(metric, metric_value(result, metric), self.best)
        if result is not None:
            if is_best:
                self.best = metric_value(result, metric)
            self.since_best = 0 if is_best else self.since_best + 1
            record.update(eval_metric=metric, best=self.best)
        self.sinks.epoch_end(record, result, stats, self.workers, ema)
        self.checkpointer.save_epoch(self._state(last_complete_epoch=epoch, metrics=record), is_best)
        if is_best and result is not None:
            self.sinks.best_eval(epoch, f"checkpoints/{self.checkpointer.best.name}", result, self.split.classes)

    def _save_mid_epoch(self, epoch: int, position: EpochPosition, global_step: int) -> None:
        """Every rank hands over its RNG state; rank 0 writes step-N.pt (and last.pt)."""
        self._refuse_non_finite(epoch, None)
        rng = dist.gather_objects(capture_rng())
        state = self._state(last_complete_epoch=epoch - 1, step=global_step)
        state.partial = PartialEpoch(epoch, position, rng)
        path = self.checkpointer.save_step(state)
        if path is not None:
            log.info("saved %s (epoch %d, %d samples into it)", path.name, epoch + 1, position.samples_done)

    def _checkpoint_tensors(self) -> Dict[str, Any]:
        """A sharded checkpoint's tensors. FSDP does not broadcast buffers as DDP does before each forward, so each
        rank's BatchNorm statistics are its own: the checkpoint keeps rank 0's, as a DDP run's does (DCP writes each
        replicated tensor from one rank, not always rank 0)."""
        ema = self.ema.module if self.ema is not None else None
        for module in (self.model, ema):
            if module is not None:
                dist.broadcast_buffers(module)
        return live_tensors(self.model, self.optimizer, ema)

    def _refuse_non_finite(self, epoch: int, eval_loss: Optional[float]) -> None:
        """Never write a checkpoint that cannot be continued: weights can turn NaN in an epoch's last step while that
        step's loss was still finite. Every rank stops together; the previous checkpoint stays the resume point."""
        bad = non_finite_entries(unwrap(self.ddp).state_dict())
        loss_bad = eval_loss is not None and not math.isfinite(eval_loss)
        if not dist.any_rank(bool(bad) or loss_bad, self.rt.device):
            return
        what = (
            f"the weights ({', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''})"
            if bad
            else f"the validation loss ({eval_loss})"
            if loss_bad
            else "another rank's weights"
        )
        raise NonFiniteLossError(
            f"{what} became non-finite in epoch {epoch + 1}; no checkpoint written, so "
            f"{self.checkpointer.last} (if any) stays the resume point. Lower --lr, set --clip-grad, or "
            "use --amp bf16/off instead of fp16",
            rank=self.rt.rank,
        )

    def _state(
        self, last_complete_epoch: int, step: Optional[int] = None, metrics: Optional[Dict] = None
    ) -> TrainState:
        """What a checkpoint keeps; a sharded one's tensors are written by the checkpointer (`live_tensors`)."""
        tensors = not self.checkpointer.sharded
        return TrainState(
            model=unwrap(self.ddp).state_dict() if tensors else {},
            optimizer=self.optimizer.state_dict() if tensors else None,
            scaler=self.precision.scaler.state_dict() if self.precision.scaler else None,
            epoch=last_complete_epoch,
            step=self.global_step if step is None else step,
            best=self.best,
            best_metric=self.cfg.optim.eval_metric,
            since_best=self.since_best,
            ema=self.ema.module.state_dict() if self.ema is not None and tensors else None,
            config=self.requested.to_flat(),
            class_names=list(self.split.classes),
            world_size=self.rt.world_size,
            global_batch=self.global_batch,
            split=self.split_info,
            metrics=metrics,
        )
