"""The five sections of a run's options, by role: `data`, `model`, `optim` (the recipe), `run` (where results
go, resuming, logging, checkpoint cadence) and `launch` (processes, nodes, rendezvous, devices). Each field declares,
once, in its metadata: its help text, its flat name when that differs from the attribute (`data.path` is
`--data`), its choices, whether it may differ between nodes (`node_local`: paths and the node's own position, left
out of the preflight comparison) and the names other training scripts give it (`elsewhere`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import yaml

from ..errors import ConfigError

Channels = Tuple[float, float, float]  # one value per RGB channel (--mean, --std)
# --eval-metric: each metric's name and which way is better
EVAL_METRICS = {"top1": "max", "top5": "max", "loss": "min", "map": "max", "macro_f1": "max", "micro_f1": "max"}
MULTILABEL_METRICS = ("map", "macro_f1", "micro_f1")


def parse_channels(value: Any) -> Optional[Channels]:
    """ "0.5,0.5,0.5", [0.5, 0.5, 0.5] or (0.5, 0.5, 0.5) as three floats; None when it is not three numbers."""
    if isinstance(value, str):
        parts: Any = value.replace(" ", "").split(",")
    elif isinstance(value, (list, tuple)):
        parts = value
    else:
        return None
    try:
        numbers = tuple(float(part) for part in parts if not isinstance(part, bool))
    except (TypeError, ValueError):
        return None
    return (numbers[0], numbers[1], numbers[2]) if len(numbers) == 3 == len(parts) else None


def parse_kwargs(value: Any) -> Optional[Dict[str, Any]]:
    """ "width=32,act=relu" or a mapping as {name: value} (values read as YAML: 3, 0.1, true, [1, 2], text); None when
    it is neither, or a name is not a Python identifier."""
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, str):
        pairs = []
        for part in filter(None, (p.strip() for p in _split_top_level(value))):
            key, sep, text = part.partition("=")
            if not sep:
                return None
            try:
                pairs.append((key.strip(), yaml.safe_load(text) if text.strip() else ""))
            except yaml.YAMLError:
                pairs.append((key.strip(), text.strip()))
    else:
        return None
    if not all(isinstance(k, str) and k.isidentifier() for k, _ in pairs):
        return None
    return dict(pairs)


def _split_top_level(text: str) -> List[str]:
    """Split on the commas outside brackets: `sizes=[1,2],act=relu` is two pairs."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def format_kwargs(values: Optional[Dict[str, Any]]) -> str:
    """{"width": 32} -> "width=32": how keyword arguments are shown."""
    return ",".join(f"{k}={v}" for k, v in (values or {}).items())


def format_channels(values) -> str:
    """(0.5, 0.5, 0.5) -> "0.5,0.5,0.5": how per-channel values are shown and typed."""
    return ",".join(f"{float(v):g}" for v in values)


def require(checks: List[Tuple[bool, str]]) -> None:
    """Raise a ConfigError with the message of the first check that fails."""
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)


def _is_host_port(text: str) -> bool:
    host, _, port = text.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


def opt(
    default: Any,
    help: str,
    *,
    flag: Optional[str] = None,
    choices: Optional[List[str]] = None,
    node_local: bool = False,
    elsewhere: Tuple[str, ...] = (),
) -> Any:
    """A config field. `elsewhere`: names other training scripts (timm's train.py, torchvision's reference
    scripts) give this option; a config file using one of them is told which ddptrain option it means."""
    return field(
        default=default,
        metadata={
            "help": help,
            "flag": flag,
            "choices": choices,
            "node_local": node_local,
            "elsewhere": elsewhere,
        },
    )


AUTO_BATCH = -1  # --batch-size auto, as the option holds it (train.autobatch finds the number)


@dataclass
class DataConfig:
    path: Optional[str] = opt(
        None,
        "the data: a folder of class sub-folders (or with train/ and val/ inside), a path,label[,split] manifest (.csv, "
        ".jsonl or .parquet), a shard set made by `ddptrain shard` (its folder, or an http(s):// URL of it), or WebDataset tar shards "
        "written by other tools (a folder of .tar files, one .tar, or a brace pattern such as "
        "'train-{000000..000099}.tar', local or http(s)://)",
        flag="data",
        node_local=True,
        elsewhere=("data_dir", "data_path"),
    )
    val_split: float = opt(0.2, "fraction of each class held out for validation")
    img_size: Optional[int] = opt(
        None,
        "training and evaluation image size in pixels (default: the model's pretrained input size, else 224)",
        elsewhere=("input_size",),
    )
    mean: Optional[Channels] = opt(
        None,
        "per-channel mean in [0, 1] units, e.g. 0.5,0.5,0.5 (default: the model's pretrained config, else ImageNet's)",
    )
    std: Optional[Channels] = opt(None, "per-channel std above 0, e.g. 0.5,0.5,0.5 (default: as for --mean)")
    interpolation: Optional[str] = opt(
        None,
        "resize interpolation (default: the model's pretrained config, else bilinear)",
        choices=["bilinear", "bicubic", "nearest"],
    )
    crop_fraction: Optional[float] = opt(
        None,
        "evaluation resizes to img_size / this and centre-crops img_size (default: the model's pretrained config, "
        "else 0.875)",
        elsewhere=("crop_pct",),
    )
    min_crop_scale: float = opt(
        0.35,
        "smallest RandomResizedCrop area fraction (ImageNet recipes use 0.08, which learns a small dataset from "
        "random weights far more slowly: docs/howto.md, 'The default recipe')",
    )
    auto_augment: Optional[str] = opt(
        None,
        "per-image augmentation policy after the crop and flip (torchvision's RandAugment, TrivialAugmentWide, "
        "AutoAugment's ImageNet policy)",
        choices=["randaugment", "trivialaugment", "autoaugment"],
        elsewhere=("aa",),
    )
    augment_magnitude: int = opt(9, "RandAugment's magnitude (0-30)")
    random_erasing: float = opt(
        0.0,
        "probability of erasing a random rectangle of each training image (black)",
        elsewhere=("reprob", "random_erase"),
    )
    repeated_aug: int = opt(
        1,
        "repeated augmentation: each image K times per epoch, its copies on different processes with their own "
        "augmentation (DeiT); an epoch keeps its length",
        elsewhere=("aug_repeats",),
    )
    mixup: float = opt(0.0, "Mixup: Beta(alpha, alpha) mixing of image pairs within a batch, soft targets; 0: off")
    cutmix: float = opt(
        0.0, "CutMix: Beta(alpha, alpha) pasted boxes between images of a batch; with --mixup, either per batch"
    )
    max_image_pixels: int = opt(
        64_000_000,
        "images with more pixels are skipped and counted as unreadable "
        "(decompression bombs); raised above Pillow's own threshold (89 Mpx), this limit is the one that counts",
    )
    max_image_mb: float = opt(128.0, "files larger than this (MB) are skipped without being read")
    fetch_timeout: float = opt(
        900.0,
        "seconds one download from a shard server may take in all, retries included (a shard, or the index); a "
        "server that trickles or stalls fails the run naming the URL instead of holding it",
    )
    task: str = opt(
        "multiclass",
        "multiclass: one class per image (cross-entropy); multilabel: any number (a CSV manifest's labels as a|b|c; "
        "binary cross-entropy per class, metrics mAP and F1 at --threshold)",
        choices=["multiclass", "multilabel"],
    )
    sampler: str = opt(
        "uniform",
        "uniform: each training image once per epoch; balanced: each epoch as many images, drawn with replacement "
        "in proportion to 1 / (images of their class), by --seed and the epoch (resumable mid-epoch)",
        choices=["uniform", "balanced"],
    )
    label_key: str = opt(
        "cls",
        "a WebDataset tar set's label: the member holding it (cls: an integer, txt: a class name, or another "
        "extension) or json:PATH, a dotted path into the sample's JSON member (e.g. json:annotation.label); for a "
        "manifest (CSV, JSON Lines, Parquet) or a Hugging Face dataset, the column holding it",
    )
    prefetch_shards: int = opt(
        2,
        "remote shards (HTTP, S3) each process downloads ahead of the one it reads, so a shard boundary does not "
        "wait for a download; 0: off",
    )
    decode: str = opt(
        "auto",
        "where and how JPEGs are decoded: cpu (at 1/2, 1/4 or 1/8 of the size where the random crop allows), full "
        "(always the whole size: the reference), gpu (nvJPEG on the device, crops there; crop and flip only); auto: "
        "gpu on a CUDA device fed by fewer than 4 loader workers per process (measured: the GPU path wins there) "
        "without --auto-augment / --random-erasing, else cpu",
        choices=["auto", "cpu", "full", "gpu"],
    )
    data_max_side: Optional[int] = opt(
        None,
        "recorded by a run on a shard set made with `ddptrain shard --max-side`: the longest image side it holds; "
        "given, the shard set must have been made with it",
    )
    workers: Optional[int] = opt(
        None,
        "DataLoader workers per process (default: CPUs per process, at most 8)",
        elsewhere=("num_workers", "j"),
    )

    def validate(self) -> DataConfig:
        require(
            [
                (self.path is not None, "--data is required: a folder of class sub-folders"),
                (0.0 <= self.val_split < 1.0, "--val-split must be in [0, 1)"),
                (self.img_size is None or self.img_size >= 8, "--img-size must be at least 8"),
                (self.crop_fraction is None or 0.0 < self.crop_fraction <= 1.0, "--crop-fraction must be in (0, 1]"),
                (0.0 < self.min_crop_scale <= 1.0, "--min-crop-scale must be in (0, 1]"),
                (0 <= self.augment_magnitude <= 30, "--augment-magnitude must be in [0, 30]"),
                (0.0 <= self.random_erasing <= 1.0, "--random-erasing must be a probability in [0, 1]"),
                (self.repeated_aug >= 1, "--repeated-aug must be 1 (off) or more"),
                (self.mixup >= 0 and self.cutmix >= 0, "--mixup and --cutmix take an alpha >= 0 (0: off)"),
                (self.workers is None or self.workers >= 0, "--workers must be 0 or more"),
                (
                    self.max_image_pixels > 0 and self.max_image_mb > 0,
                    "--max-image-pixels and --max-image-mb must be positive",
                ),
                (self.fetch_timeout > 0, "--fetch-timeout must be positive"),
                (0 <= self.prefetch_shards <= 8, "--prefetch-shards must be in [0, 8]"),
                (
                    self.decode != "gpu" or (self.auto_augment is None and self.random_erasing == 0),
                    "--decode gpu crops and flips on the GPU only: drop --auto-augment / --random-erasing, or use "
                    "--decode cpu",
                ),
            ]
        )
        if self.std is not None and min(self.std) <= 0:
            raise ConfigError(f"--std must be three numbers above 0, not {format_channels(self.std)}")
        return self

    def folder(self) -> str:
        """--data, which `validate` requires."""
        if self.path is None:
            raise ConfigError("--data is required: a folder of class sub-folders")
        return self.path


@dataclass
class ModelConfig:
    name: str = opt(
        "resnet18",
        "torchvision model name, timm:NAME for a timm model, or your own: path/to/file.py:FACTORY or "
        "package.module:FACTORY, a callable that returns an nn.Module for num_classes",
        flag="model",
    )
    kwargs: Optional[Dict[str, Any]] = opt(
        None,
        "keyword arguments for the model, k=v,k2=v2 (values read as YAML: 3, 0.1, true, text), or a mapping in "
        "the config file",
        flag="model_kwargs",
    )
    head: Optional[str] = opt(
        None,
        "the classifier head's module name (e.g. fc, head.fc), for --freeze-backbone and --weights (default: the "
        "last Linear/Conv2d layer with one output per class)",
        flag="head_name",
    )
    drop_path: float = opt(
        0.0,
        "stochastic depth rate (timm: drop_path_rate; torchvision: stochastic_depth_prob; your factory: its "
        "drop_path_rate or drop_path argument)",
        elsewhere=("drop_path_rate",),
    )
    dropout: float = opt(
        0.0,
        "dropout before the classifier (timm: drop_rate; torchvision and your factory: dropout or drop_rate)",
        elsewhere=("drop", "drop_rate"),
    )
    weights: Optional[str] = opt(
        None,
        "local state dict or checkpoint to start from (never downloaded)",
        node_local=True,
        elsewhere=("initial_checkpoint", "pretrained_path"),
    )
    pretrained: bool = opt(
        False,
        "start from the model's pretrained weights (torchvision: its DEFAULT weights; timm: its default tag), from "
        "the libraries' caches (TORCH_HOME, the Hugging Face cache), downloaded there when missing",
        elsewhere=("pretrained_weights",),
    )
    freeze_backbone: bool = opt(False, "train only the classifier head")
    sync_bn: bool = opt(False, "convert BatchNorm to SyncBatchNorm when more than one process")
    channels_last: bool = opt(False, "use channels_last memory format")
    compile: bool = opt(False, "torch.compile the model (before the DDP wrap)", elsewhere=("torchcompile",))
    grad_compress: str = opt(
        "off", "cast gradients for the all-reduce (halves the bytes on the wire)", choices=["off", "bf16", "fp16"]
    )
    strategy: str = opt(
        "ddp",
        "ddp: every process holds the whole model, gradients and optimizer state; fsdp: each holds 1/N of them "
        "(FSDP2, per block), for models that do not fit one device; checkpoints then become sharded folders",
        choices=["ddp", "fsdp"],
        elsewhere=("distributed_type",),
    )
    reshard_after_forward: bool = opt(
        True,
        "fsdp: free the gathered parameters after each block's forward and gather them again for its backward "
        "(less memory; --no-reshard-after-forward keeps them: one all-gather less per block and step)",
    )
    fsdp_offload: bool = opt(
        False,
        "fsdp on CUDA: keep the sharded parameters, gradients and optimizer state in CPU memory (the optimizer "
        "steps on the CPU)",
        elsewhere=("cpu_offload",),
    )
    grad_checkpointing: bool = opt(
        False,
        "recompute each block's activations in the backward instead of keeping them (timm's "
        "set_grad_checkpointing; torch.utils.checkpoint per block otherwise): less memory, about a third more compute",
        elsewhere=("activation_checkpointing",),
    )

    def validate(self) -> ModelConfig:
        # the name and the weights file are checked where they are used (models.build, checks.py)
        require(
            [
                (not (self.pretrained and self.weights), "give --pretrained or --weights PATH, not both"),
                (
                    not (self.pretrained and is_factory(self.name)),
                    f"--pretrained takes torchvision and timm models; for {self.name} pass --weights PATH (a state "
                    "dict, .safetensors or checkpoint)",
                ),
                (0 <= self.drop_path < 1, f"--drop-path must be in [0, 1), not {self.drop_path:g}"),
                (0 <= self.dropout < 1, f"--dropout must be in [0, 1), not {self.dropout:g}"),
                (self.head is None or bool(self.head.strip()), "--head-name must name a module, e.g. fc"),
                (
                    not (self.strategy == "fsdp" and self.sync_bn),
                    "--sync-bn is not supported with --strategy fsdp: use it with --strategy ddp, or train the "
                    "model's BatchNorm per process (the default)",
                ),
                (
                    not (self.strategy == "fsdp" and self.grad_compress != "off"),
                    "--grad-compress is a DDP communication hook; with --strategy fsdp the gradients are reduced "
                    "in float32 under --amp bf16: drop --grad-compress",
                ),
                (self.strategy == "fsdp" or not self.fsdp_offload, "--fsdp-offload needs --strategy fsdp"),
            ]
        )
        self.name = absolute_factory(self.name)
        return self


TIMM_PREFIX = "timm:"  # --model timm:NAME is a timm model


def is_factory(name: str) -> bool:
    """`path/to/file.py:FACTORY` or `package.module:FACTORY`: a model of the user's own (`timm:NAME` is timm's)."""
    return ":" in name and not name.startswith(TIMM_PREFIX)


HUB_PREFIXES = ("hf-hub:", "hf_hub:")


def hub_spelling(name: str) -> Optional[str]:
    """Why `name`, a model as the Hugging Face Hub names it (`timm/resnet50.a1_in1k`, `hf-hub:timm/...`), is not a
    --model here, and what to write instead; None for any other name."""
    bare = next((name[len(prefix) :] for prefix in HUB_PREFIXES if name.startswith(prefix)), name)
    if bare.startswith("timm/"):
        return f"--model {name} is a timm model as the Hugging Face Hub names it: write --model timm:{bare[5:]}"
    if bare != name:
        return (
            f"--model {name}: models on the Hugging Face Hub are not built by name here (that would read the Hub); "
            "for timm's write --model timm:NAME, for another, a model file that builds it (path/to/file.py:FACTORY)"
        )
    return None


def absolute_factory(name: str) -> str:
    """A model file named by an absolute path, so that eval, predict, export and --resume from another folder find
    the file the run was trained with; other names as they are."""
    if not is_factory(name):
        return name
    where, _, factory = name.rpartition(":")
    return f"{os.path.abspath(where)}:{factory}" if where.endswith(".py") else name


# The default recipe is AdamW, 1e-3, weight decay 0.05: it learns from scratch and fine-tunes on small data, where
# ImageNet's SGD (0.05 for a global batch of 64, one epoch of warm-up) blows up in the first steps after the warm-up
# and stays at chance (docs/howto.md, "the default recipe").
@dataclass
class OptimConfig:
    epochs: int = opt(10, "number of epochs")
    batch_size: int = opt(
        32,
        "batch size per process (global batch = this x processes x grad-accum); auto: the largest that fits the GPU, "
        "found by trying before training and recorded in config.yaml",
        elsewhere=("b", "batchsize"),
    )
    optimizer: str = opt(
        "adamw",
        "optimizer, from timm's factory (adamw: decoupled weight decay; sgd: momentum without Nesterov; nesterov: "
        "with it)",
        choices=["sgd", "nesterov", "adamw", "adam", "lamb", "lars", "lion", "nadamw", "rmsprop", "adafactor"],
        elsewhere=("opt",),
    )
    lr: float = opt(1e-3, "peak learning rate for the global batch (ImageNet-style SGD wants about 0.1 per 256 images)")
    lr_base: Optional[float] = opt(
        None,
        "peak learning rate per 256 images of global batch: --lr becomes this x global batch / 256, so a recipe "
        "keeps its meaning on another number of GPUs (the learning rate used is logged)",
    )
    momentum: float = opt(0.9, "momentum (sgd, nesterov, lars, rmsprop)")
    weight_decay: float = opt(
        0.05,
        "weight decay (never applied to norm layers, biases, or what the model exempts: position embeddings...)",
        elsewhere=("wd",),
    )
    layer_decay: Optional[float] = opt(
        None,
        "layer-wise learning-rate decay for fine-tuning (timm models, e.g. 0.65 for a ViT): each layer's rate is "
        "this x the next one's, the head's is the full rate",
    )
    warmup_epochs: float = opt(
        1.0, "linear warmup length in epochs, then the --schedule, per step", elsewhere=("lr_warmup_epochs",)
    )
    schedule: str = opt(
        "cosine",
        "learning-rate decay after the warmup, on fractional epochs: cosine or linear to --min-lr-ratio, or step "
        "(x --decay-rate every --decay-epochs)",
        choices=["cosine", "linear", "step"],
        elsewhere=("sched", "lr_scheduler"),
    )
    decay_epochs: float = opt(30.0, "step schedule: epochs between decays", elsewhere=("lr_step_size",))
    decay_rate: float = opt(0.1, "step schedule: factor at each decay", elsewhere=("lr_gamma",))
    min_lr_ratio: float = opt(0.01, "final learning rate as a fraction of --lr (cosine, linear)")
    label_smoothing: float = opt(0.0, "label smoothing for the cross-entropy loss", elsewhere=("smoothing",))
    amp: str = opt(
        "auto", "mixed precision: auto = bf16 on capable CUDA, off on CPU", choices=["auto", "bf16", "fp16", "off"]
    )
    clip_grad: Optional[float] = opt(None, "clip the global gradient norm to this value", elsewhere=("clip_grad_norm",))
    grad_accum: int = opt(1, "micro-batches per optimizer step", elsewhere=("grad_accum_steps",))
    seed: int = opt(42, "seed for the split, the shuffling and the augmentations")
    ema_decay: float = opt(
        0.0,
        "keep an exponential moving average of the weights with this decay (e.g. 0.9998; 0: off), evaluated each "
        "epoch next to the model (val_top1_ema) and saved in every checkpoint",
        elsewhere=("model_ema_decay",),
    )
    ema_warmup: bool = opt(True, "EMA decay warmup (timm's): a lower decay over the first steps")
    patience: Optional[int] = opt(
        None,
        "stop early when the --eval-metric has not improved for this many evaluations in a row (best.pt keeps the "
        "best)",
        elsewhere=("early_stopping_patience",),
    )
    eval_metric: str = opt(
        "top1",
        "the validation metric that picks best.pt and counts for --patience (loss: lower is better; the others: "
        "higher)",
        choices=list(EVAL_METRICS),
    )
    class_weights: str = opt(
        "none",
        "loss weight per class: none, auto (N / (classes x images of the class); multi-label: negatives / positives "
        "of each class), or a JSON file of class: weight",
        node_local=True,
    )
    threshold: float = opt(
        0.5, "--task multilabel: a class is predicted when its sigmoid score is at least this (F1, predict)"
    )

    def validate(self) -> OptimConfig:
        require(
            [
                (self.epochs >= 1, "--epochs must be at least 1"),
                (self.batch_size >= 1 or self.batch_size == AUTO_BATCH, "--batch-size must be at least 1, or auto"),
                (self.grad_accum >= 1, "--grad-accum must be at least 1"),
                (self.lr > 0, "--lr must be positive"),
                (self.lr_base is None or self.lr_base > 0, "--lr-base must be positive"),
                (
                    self.decay_epochs > 0 and 0 < self.decay_rate <= 1,
                    "--decay-epochs must be positive, --decay-rate in (0, 1]",
                ),
                (self.clip_grad is None or self.clip_grad > 0, "--clip-grad must be positive"),
                (self.patience is None or self.patience >= 1, "--patience must be at least 1"),
                (0.0 < self.threshold < 1.0, f"--threshold must be in (0, 1), not {self.threshold:g}"),
                (0.0 <= self.ema_decay < 1.0, "--ema-decay must be in [0, 1) (0: off)"),
                (self.layer_decay is None or 0.0 < self.layer_decay <= 1.0, "--layer-decay must be in (0, 1]"),
            ]
        )
        return self


@dataclass
class RunConfig:
    out: str = opt(
        "runs/exp",
        "run directory: checkpoints, logs, metrics",
        node_local=True,
        elsewhere=("output", "output_dir"),
    )
    resume: Optional[str] = opt(
        None,
        "'auto': the newest complete checkpoint in the run dir (last.pt, a mid-epoch step checkpoint or a sharded "
        "last.dcp folder), starting fresh when there is none; or a checkpoint file or .dcp folder",
        node_local=True,
    )
    stop_after_epochs: Optional[int] = opt(
        None, "train at most this many epochs in this invocation, then exit (resume later)"
    )
    log_every: int = opt(
        10,
        "steps between loss reductions, progress updates and TensorBoard points; also how "
        "often the ranks check for a stop signal (SIGTERM/SIGUSR1)",
    )
    progress_every: float = opt(
        30.0,
        "seconds between progress lines within an epoch (step, share of the epoch, loss, images/s, data wait, "
        "time to the epoch's end) on rank 0: on the console and in train.log when the console is not a terminal, in "
        "train.log beside the progress bar; 0: none",
    )
    save_every_steps: int = opt(0, "also checkpoint every this many optimizer steps, mid-epoch (0: only at epoch ends)")
    keep_last: int = opt(3, "mid-epoch checkpoints (step-N.pt) to keep; older ones are deleted")
    eval_every: int = opt(1, "evaluate every this many epochs, and after the last one", elsewhere=("eval_interval",))
    overwrite: bool = opt(
        False,
        "delete what an earlier run left in --out (checkpoints, metrics, TensorBoard, logs) "
        "and start over; without it, ddptrain refuses to replace an earlier run",
        node_local=True,
    )
    log_to: str = opt(
        "",
        "where the per-epoch metrics also go besides RUN_DIR/metrics.jsonl and TensorBoard (always written): a comma "
        "list of csv (RUN_DIR/metrics.csv), mlflow, wandb",
    )

    def trackers(self) -> List[str]:
        """--log-to as a list, without duplicates; `tensorboard` (always written, accepted for older configs) left
        out. Which names exist is the trackers' business (ddptrain.train.trackers), checked before launch."""
        names = (name.strip().lower() for name in self.log_to.split(","))
        return list(dict.fromkeys(name for name in names if name and name != "tensorboard"))

    def validate(self) -> RunConfig:
        require(
            [
                (self.log_every >= 1, "--log-every must be at least 1"),
                (self.progress_every >= 0, "--progress-every must be 0 (no lines) or more seconds"),
                (self.eval_every >= 1, "--eval-every must be at least 1"),
                (self.save_every_steps >= 0, "--save-every-steps must be 0 (off) or more"),
                (self.keep_last >= 1, "--keep-last must be at least 1"),
            ]
        )
        return self


@dataclass
class LaunchConfig:
    device: str = opt("auto", "device kind", choices=["auto", "cpu", "cuda"])
    nproc: Optional[int] = opt(None, "processes on this node (launches through torchrun)")
    nnodes: str = opt("1", "number of nodes, or MIN:MAX for an elastic job (with --rdzv-endpoint)")
    node_rank: int = opt(0, "rank of this node (static rendezvous)", node_local=True)
    master_addr: Optional[str] = opt(None, "address of node 0 (default 127.0.0.1 on one node)")
    master_port: Optional[int] = opt(None, "port of node 0 (default: a free port on one node)")
    rdzv_endpoint: Optional[str] = opt(
        None,
        "HOST:PORT of an elastic (c10d) rendezvous, the same on every node; replaces --master-addr/--node-rank",
    )
    rdzv_id: str = opt("ddptrain", "job id shared by every node of an elastic job")
    rdzv_conf: Optional[str] = opt(
        None,
        "more settings for an elastic job's rendezvous, KEY=VALUE[,KEY=VALUE], as torchrun's --rdzv-conf: e.g. "
        "last_call_timeout=10,keep_alive_interval=2 to re-form sooner after a node is lost (see docs/multinode.md)",
    )
    rdzv_timeout: float = opt(300.0, "seconds to wait for every node to join (and for the master to answer)")
    iface: Optional[str] = opt(
        None, "network interface for gloo/NCCL traffic between nodes (e.g. eth1)", node_local=True
    )
    max_restarts: int = opt(0, "restart all workers this many times when one fails")
    dist_timeout: float = opt(
        600.0,
        "seconds a collective may wait once training runs (start-up allows at least "
        "30 min); a stalled rank then fails the job, named",
    )

    @property
    def uses_launcher(self) -> bool:
        """True when this invocation must start worker processes through torchrun."""
        return (
            (self.nproc or 1) > 1 or self.node_range()[1] > 1 or self.max_restarts > 0 or self.rdzv_endpoint is not None
        )

    @property
    def single_node(self) -> bool:
        return self.rdzv_endpoint is None and str(self.nnodes) == "1"

    def node_range(self) -> Tuple[int, int]:
        """(min, max) nodes from --nnodes N or MIN:MAX."""
        low, _, high = str(self.nnodes).partition(":")
        try:
            nodes = (int(low), int(high or low))
        except ValueError:
            raise ConfigError(f"--nnodes {self.nnodes}: give a number of nodes, or MIN:MAX") from None
        if not 1 <= nodes[0] <= nodes[1]:
            raise ConfigError(f"--nnodes {self.nnodes}: need 1 <= MIN <= MAX")
        return nodes

    def validate(self) -> LaunchConfig:
        nodes, elastic = self.node_range(), self.rdzv_endpoint is not None
        require(
            [
                (self.nproc is None or self.nproc >= 1, "--nproc must be at least 1"),
                (elastic or nodes[0] == nodes[1], "--nnodes MIN:MAX (elastic) needs --rdzv-endpoint HOST:PORT"),
                (elastic or 0 <= self.node_rank < nodes[1], "--node-rank must be in [0, --nnodes)"),
                (
                    elastic or self.single_node or self.master_addr is not None,
                    "--nnodes > 1 needs --master-addr (the address of node 0, reachable from every node)",
                ),
                (not elastic or _is_host_port(self.rdzv_endpoint or ""), "--rdzv-endpoint must be HOST:PORT"),
                (self.rdzv_conf is None or elastic, "--rdzv-conf applies to an elastic job (--rdzv-endpoint)"),
                (
                    self.rdzv_conf is None
                    or all("=" in item and item.split("=", 1)[0].strip() for item in self.rdzv_conf.split(",")),
                    "--rdzv-conf must be KEY=VALUE[,KEY=VALUE]",
                ),
                (self.rdzv_timeout > 0, "--rdzv-timeout must be positive"),
                (self.dist_timeout > 0, "--dist-timeout must be positive"),
            ]
        )
        return self


SECTIONS = {"data": DataConfig, "model": ModelConfig, "optim": OptimConfig, "run": RunConfig, "launch": LaunchConfig}
SECTION_TITLES = {
    "data": "data",
    "model": "model",
    "optim": "optimisation recipe",
    "run": "run directory and checkpoints",
    "launch": "processes, nodes and devices",
}
