"""`eval` (exact metrics on 1..N processes) and `predict` (top-k classes per image) from a checkpoint
or an exported model."""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch

from ..config import Config
from ..data.datasets import UnreadableFiles
from ..data.images import (
    IMAGE_EXTENSIONS,
    UNREADABLE_ERRORS,
    ImageLimits,
    describe_unreadable,
    file_kind,
    is_image_file,
    is_other_picture,
    left_out_pictures,
    not_read,
    read_image_file,
)
from ..data.index import Samples
from ..data.loaders import LoaderSettings, auto_workers, choose_decode, evaluation_images
from ..data.sources import Reading, all_images, load_split, reading_for
from ..data.split import run_split, same_split, split_summary
from ..data.transforms import Preprocess, eval_transform, normalize
from ..errors import DataError
from ..handed import DATASET_PREFIX
from ..runtime import dist
from ..runtime.env import DistEnv, cpus_per_process
from ..train.evaluate import evaluate
from ..train.metrics import multilabel_threshold
from ..train.precision import resolve_precision
from ..train.progress import CountProgress
from .modelfile import LoadedModel, load_model

log = logging.getLogger("ddptrain")


@dataclass
class EvalOptions:
    checkpoint: str
    data: str
    split: str = "val"  # val: the training run's validation split; all: every image under data
    batch_size: int = 32  # as for train
    workers: Optional[int] = None
    device: str = "auto"
    amp: str = "auto"
    dist_timeout: float = 600.0  # as for train
    trust_torchscript: bool = False  # a *.torchscript.pt file runs its own code when loaded
    ema: bool = False  # the checkpoint's EMA weights
    decode: str = "auto"  # as for train: cpu (reduced-size where the crop allows), full, gpu
    progress_every: float = 30.0  # seconds between progress lines where stderr is not a terminal; 0: none


def _reading(data: str, trained: Config) -> Reading:
    """How `data` is read with the options of the run that trained the checkpoint (its --label-key only where it
    means the same kind of thing)."""
    return reading_for(data, Reading.of(trained.data), trained.data.path or "")


def eval_samples(opts: EvalOptions, loaded: LoadedModel) -> Samples:
    """`--split all`: every image. `--split val`: the run's own validation split, read back from its splits/ when
    the checkpoint sits in its run directory; otherwise computed again, and refused when it is not the split the
    checkpoint was trained with."""
    if opts.split == "all":
        return all_images(opts.data, loaded.class_names, _reading(opts.data, loaded.config))
    cfg = loaded.config
    if (cfg.data.path or "").startswith(DATASET_PREFIX) and not opts.data.startswith(DATASET_PREFIX):
        raise DataError(
            f"{opts.checkpoint} was trained on a Python dataset handed to ddptrain.fit ({cfg.data.path}): its "
            f"validation split is a list of that dataset's indices, not of {opts.data}. Use --split all"
        )
    listed = load_split(opts.data, cfg.data.val_split, cfg.optim.seed, _reading(opts.data, cfg))
    run_dir = Path(opts.checkpoint).resolve().parent.parent  # RUN_DIR/checkpoints/best.pt
    fix = (
        f"--split val scores the run's validation images, which need the folder it trained on ({cfg.data.path}) "
        f"or a copy of it; --split all scores every image in {opts.data}"
    )
    split, read_back = run_split(listed, run_dir if (run_dir / "splits").is_dir() else None, "--split val", True, fix)
    if not read_back and loaded.split is not None and not same_split(split, loaded.split):
        raise DataError(split_differs(opts, split, loaded))
    if split.classes != loaded.class_names:
        raise DataError(
            f"{opts.data} has classes {split.classes} but the checkpoint knows "
            f"{loaded.class_names}; use --split all for a folder with a subset of the classes"
        )
    return split.val


def split_differs(opts: EvalOptions, split, loaded: LoadedModel) -> str:
    """Why --data does not give the validation split the checkpoint was trained with, as far as can be told."""
    here, saved = split_summary(split), loaded.split or {}
    cfg = loaded.config
    why = f"here {here['train']} train / {here['val']} val images, the checkpoint's {saved.get('train')} / {saved.get('val')}"
    if split.fixed and split.made_with:
        made = split.made_with
        if (made.get("seed"), made.get("val_split")) != (cfg.optim.seed, cfg.data.val_split):
            return (
                f"{opts.data} is a shard set split with --seed {made.get('seed')} --val-split {made.get('val_split')}, "
                f"and {opts.checkpoint} was trained on a split with --seed {cfg.optim.seed} --val-split "
                f"{cfg.data.val_split} ({why}): make the shards with the run's --seed and --val-split, or use "
                "--split all on the folder"
            )
    return (
        f"{opts.data} does not give the validation split {opts.checkpoint} was trained with ({why}, and another file "
        "list); evaluate on the data it was trained on, or use --split all"
    )


def run_eval(opts: EvalOptions, env: DistEnv, print_json: bool = True) -> Dict:
    rt = dist.setup(env, opts.device, opts.dist_timeout)
    try:
        loaded = load_model(opts.checkpoint, rt.device, opts.trust_torchscript, opts.ema)
        workers = auto_workers(opts.workers, cpus_per_process(env.local_world_size))
        settings = LoaderSettings.for_device(
            rt.device, opts.batch_size, workers, choose_decode(opts.decode, rt.device, workers)
        )
        loader = evaluation_images(
            # rank 0 lists the data (and compares its files for copies) once; every rank gets the list
            dist.computed_on_main(rt, partial(eval_samples, opts, loaded), "while listing the data"),
            Preprocess.of(loaded.config.data),  # as the model was trained
            rt.rank,
            rt.world_size,
            settings,
            persistent=False,
            limits=ImageLimits.of(loaded.config.data),  # the caps the model was trained with
        )
        result = evaluate(
            loaded.model,
            loader,
            resolve_precision(opts.amp, rt.device),
            len(loaded.class_names),
            rt,
            on_failure=UnreadableFiles(),
            threshold=multilabel_threshold(loaded.config),
            progress_every=opts.progress_every,
            what="eval",
        )
        report = {
            **result.to_dict(loaded.class_names),
            "split": opts.split,
            "checkpoint": str(opts.checkpoint),
            "world_size": rt.world_size,
        }
        if rt.is_main and print_json:
            print(json.dumps(report), flush=True)
        return report
    finally:
        dist.cleanup()


def expand_paths(paths: Sequence[str]) -> Iterator[Tuple[str, Optional[str]]]:
    """(path, error) for every image named or found under a named folder, in a stable order."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            entries = [p for p in path.rglob("*") if not p.is_dir()]
            others = [str(p.relative_to(path)) for p in entries if is_other_picture(p) and p.is_file()]
            if others:
                log.warning("%s", left_out_pictures(path, others))
            for found in sorted(p for p in entries if is_image_file(p)):  # a FIFO or broken link among them: said
                yield str(found), None if found.is_file() else _not_regular(found)
        elif path.is_file():
            yield str(path), None
        elif os.path.lexists(path):
            yield str(path), _not_regular(path)
        else:
            yield str(path), "no such file or folder"


def _not_regular(path: Path) -> str:
    return not_read(file_kind(path))


def _data_images(
    data: Sequence[str], loaded: LoadedModel
) -> Tuple[int, Iterator[Tuple[str, Optional[Callable], None]]]:
    """How many images the --data locations hold, and (name, a reader of its bytes, None) for each: each
    location's training part then its validation part (as the source splits it with no hold-out)."""
    parts = []
    for location in data:
        split = load_split(location, 0.0, loaded.config.optim.seed, _reading(location, loaded.config))
        parts += [split.train, split.val]
    found = ((samples.name(i), partial(samples.read, i), None) for samples in parts for i in range(len(samples)))
    return sum(len(samples) for samples in parts), found


def run_predict(
    checkpoint_path: str,
    paths: Sequence[str],
    topk: int = 5,
    device: str = "auto",
    batch_size: int = 32,
    out=sys.stdout,
    trust_torchscript: bool = False,
    ema: bool = False,
    data: Sequence[str] = (),
    progress_every: float = 30.0,
) -> int:
    """Print one JSON object per image (of `paths`, then of every --data); return 1 when any could not be read.
    Where `out` is not a terminal (where it is, its lines are the progress), progress goes to stderr: a bar on a
    terminal, else a line at least every `progress_every` seconds."""
    items: List[Tuple[str, Optional[str]]] = list(expand_paths(paths))
    if paths and not items:
        raise DataError(
            f"no images in {', '.join(map(str, paths))} (extensions: {' '.join(sorted(IMAGE_EXTENSIONS))}); give image "
            "files or folders that hold some"
        )
    torch_device = torch.device(dist.resolve_device_kind(device))
    loaded = load_model(checkpoint_path, torch_device, trust_torchscript, ema)
    preprocess = Preprocess.of(loaded.config.data)  # as the model was trained
    transform = eval_transform(preprocess.img_size, preprocess)
    limits = ImageLimits.of(loaded.config.data)
    batcher = _Batcher(loaded, max(1, min(topk, len(loaded.class_names))), torch_device, out, preprocess, batch_size)
    in_data, from_data = _data_images(data, loaded)
    shown = not (hasattr(out, "isatty") and out.isatty())
    with CountProgress(len(items) + in_data, "predict", "images", progress_every, shown) as progress:
        for path, read, error in itertools.chain(((p, None, e) for p, e in items), from_data):
            if error is None:
                try:
                    raw = read(limits) if read is not None else read_image_file(path, limits)
                    tensor = transform.load(raw, limits)
                except UNREADABLE_ERRORS as exc:
                    error = describe_unreadable(exc)
            if error is None:
                batcher.add(path, tensor)
            else:
                batcher.fail(path, error)
            progress.update()
    batcher.flush()
    return 1 if batcher.failures else 0


class _Batcher:
    """Images waiting for one forward, printed in input order: an unreadable image's line comes after the lines of
    those before it."""

    def __init__(self, loaded: LoadedModel, k: int, device: torch.device, out, preprocess: Preprocess, size: int):
        self.loaded, self.k, self.device, self.out = loaded, k, device, out
        self.preprocess, self.size = preprocess, size
        self.pending: List[Tuple[str, torch.Tensor]] = []
        self.failures = 0

    def add(self, path: str, tensor: torch.Tensor) -> None:
        self.pending.append((path, tensor))
        if len(self.pending) == self.size:
            self.flush()

    def fail(self, path: str, error: str) -> None:
        self.failures += 1
        self.flush()
        print(json.dumps({"path": path, "error": error}), file=self.out, flush=True)

    def flush(self) -> None:
        if self.pending:
            _emit(self.loaded, self.pending, self.k, self.device, self.out, self.preprocess)
            self.pending = []


@torch.inference_mode()
def _emit(loaded: LoadedModel, pending, k: int, device: torch.device, out, preprocess: Preprocess) -> None:
    images = normalize(torch.stack([tensor for _, tensor in pending]).to(device), preprocess.stats)
    logits = loaded.model(images).float()
    threshold = multilabel_threshold(loaded.config)
    if threshold is not None:  # --task multilabel: every class at or above the threshold, and the top k scores
        _emit_multilabel(loaded, pending, k, torch.sigmoid(logits), threshold, out)
        return
    probs = torch.softmax(logits, dim=1)
    values, indices = probs.topk(k, dim=1)
    for (path, _), row_values, row_indices in zip(pending, values.tolist(), indices.tolist()):
        topk = [{"class": loaded.class_names[i], "prob": round(p, 6)} for p, i in zip(row_values, row_indices)]
        print(json.dumps({"path": path, "topk": topk}), file=out, flush=True)


def _emit_multilabel(loaded: LoadedModel, pending, k: int, scores: torch.Tensor, threshold: float, out) -> None:
    names = loaded.class_names
    values, indices = scores.topk(min(k, len(names)), dim=1)
    for (path, _), row, top_values, top_indices in zip(pending, scores.tolist(), values.tolist(), indices.tolist()):
        labels = sorted(
            ({"class": names[i], "score": round(v, 6)} for i, v in enumerate(row) if v >= threshold),
            key=lambda entry: -entry["score"],
        )
        topk = [{"class": names[i], "score": round(v, 6)} for v, i in zip(top_values, top_indices)]
        print(json.dumps({"path": path, "labels": labels, "threshold": threshold, "topk": topk}), file=out, flush=True)
