"""The one typed configuration of a training run: defaults < YAML file < command-line flags.

`Config` holds five sections by role — `data`, `model`, `optim` (the recipe), `run` (where results
go, resuming, logging, checkpoint cadence) and `launch` (processes, nodes, rendezvous, devices).
Flags and the keys of `config.yaml` stay flat (`--lr`, `lr: 0.1`); a YAML file may also use the
nested form (`optim: {lr: 0.1}`). Each field declares, once, in its metadata: its help text, its flat
name when that differs from the attribute (`data.path` is `--data`), its choices, whether it may differ
between nodes (`node_local`: paths and the node's own position, left out of the preflight comparison)
and how `ddptrain report` treats a difference (`report`).

Values are converted to the declared type or refused with a `ConfigError` naming the key (PyYAML
reads `lr: 1e-3` as a string), and `validate` checks what involves several fields — all before any
process starts. The standard library and PyYAML only: the command line starts without torch.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import yaml

from .errors import ConfigError

# How `ddptrain report` treats an option whose value differs between runs.
LEGEND = "legend"  # named in figure legends and in the differences table
TABLE = "table"  # in the differences table only: paths, logging, fault tolerance
HIDDEN = "hidden"  # plumbing (where a run was written, how its processes met): never a difference worth a row

# --log-to: where per-epoch metrics go besides metrics.jsonl; the Python module each optional one needs, and the
# extra that installs it (`pip install 'ddptrain[mlflow]'`)
TRACKERS = ("tensorboard", "csv", "mlflow", "wandb")
TRACKER_MODULES = {"mlflow": "mlflow", "wandb": "wandb"}


def opt(
    default: Any,
    help: str,
    *,
    flag: Optional[str] = None,
    choices: Optional[List[str]] = None,
    node_local: bool = False,
    report: str = LEGEND,
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
            "report": report,
            "elsewhere": elsewhere,
        },
    )


@dataclass
class DataConfig:
    path: Optional[str] = opt(
        None,
        "the data: a folder of class sub-folders (or with train/ and val/ inside), a path,label[,split] CSV manifest, "
        "or a shard set made by `ddptrain shard` (its folder, or an http(s):// URL of it)",
        flag="data",
        node_local=True,
        report=TABLE,
        elsewhere=("data_dir", "data_path"),
    )
    val_split: float = opt(0.2, "fraction of each class held out for validation")
    img_size: Optional[int] = opt(
        None,
        "training and evaluation image size in pixels (default: the model's pretrained input size, else 224)",
        elsewhere=("input_size",),
    )
    mean: Optional[str] = opt(
        None,
        "per-channel mean in [0, 1] units, e.g. 0.5,0.5,0.5 (default: the model's pretrained config, else ImageNet's)",
    )
    std: Optional[str] = opt(None, "per-channel std, e.g. 0.5,0.5,0.5 (default: as for --mean)")
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
    min_crop_scale: float = opt(0.08, "smallest RandomResizedCrop area fraction")
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
        "(decompression bombs); PIL itself warns at 89 Mpx",
        report=TABLE,
    )
    max_image_mb: float = opt(128.0, "files larger than this (MB) are skipped without being read", report=TABLE)
    fetch_timeout: float = opt(
        900.0,
        "seconds one download from a shard server may take in all, retries included (a shard, or the index); a "
        "server that trickles or stalls fails the run naming the URL instead of holding it",
        report=TABLE,
    )
    workers: Optional[int] = opt(
        None,
        "DataLoader workers per process (default: CPUs per process, at most 8)",
        report=TABLE,
        elsewhere=("num_workers",),
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
            ]
        )
        for name in ("mean", "std"):
            value = getattr(self, name)
            if value is not None:
                channels(value, f"--{name}", positive=name == "std")
        return self

    def folder(self) -> str:
        """--data, which `validate` requires."""
        if self.path is None:
            raise ConfigError("--data is required: a folder of class sub-folders")
        return self.path


@dataclass
class ModelConfig:
    name: str = opt("resnet18", "torchvision model name, or timm:NAME for a timm model", flag="model")
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

    def validate(self) -> ModelConfig:
        # the name and the weights file are checked where they are used (models.build, checks.py)
        require([(not (self.pretrained and self.weights), "give --pretrained or --weights PATH, not both")])
        return self


@dataclass
class OptimConfig:
    epochs: int = opt(10, "number of epochs")
    batch_size: int = opt(32, "batch size per process (global batch = this x processes x grad-accum)")
    optimizer: str = opt(
        "sgd",
        "optimizer, from timm's factory (sgd: momentum without Nesterov; nesterov: with it)",
        choices=["sgd", "nesterov", "adamw", "adam", "lamb", "lars", "lion", "nadamw", "rmsprop", "adafactor"],
        elsewhere=("opt",),
    )
    lr: float = opt(0.05, "peak learning rate for the global batch")
    lr_base: Optional[float] = opt(
        None,
        "peak learning rate per 256 images of global batch: --lr becomes this x global batch / 256, so a recipe "
        "keeps its meaning on another number of GPUs (the learning rate used is logged)",
    )
    momentum: float = opt(0.9, "momentum (sgd, nesterov, lars, rmsprop)")
    weight_decay: float = opt(
        1e-4,
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
        "stop early when val_top1 has not improved for this many evaluations in a row (best.pt keeps the best)",
        elsewhere=("early_stopping_patience",),
    )

    def validate(self) -> OptimConfig:
        require(
            [
                (self.epochs >= 1, "--epochs must be at least 1"),
                (self.batch_size >= 1, "--batch-size must be at least 1"),
                (self.grad_accum >= 1, "--grad-accum must be at least 1"),
                (self.lr > 0, "--lr must be positive"),
                (self.lr_base is None or self.lr_base > 0, "--lr-base must be positive"),
                (
                    self.decay_epochs > 0 and 0 < self.decay_rate <= 1,
                    "--decay-epochs must be positive, --decay-rate in (0, 1]",
                ),
                (self.clip_grad is None or self.clip_grad > 0, "--clip-grad must be positive"),
                (self.patience is None or self.patience >= 1, "--patience must be at least 1"),
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
        report=HIDDEN,
        elsewhere=("output", "output_dir"),
    )
    resume: Optional[str] = opt(
        None, "'auto' (last.pt in the run dir when present) or a checkpoint path", node_local=True, report=HIDDEN
    )
    stop_after_epochs: Optional[int] = opt(
        None, "train at most this many epochs in this invocation, then exit (resume later)", report=TABLE
    )
    log_every: int = opt(
        10,
        "steps between loss reductions, progress updates and TensorBoard points; also how "
        "often the ranks check for a stop signal (SIGTERM/SIGUSR1)",
        report=TABLE,
    )
    save_every_steps: int = opt(
        0, "also checkpoint every this many optimizer steps, mid-epoch (0: only at epoch ends)", report=TABLE
    )
    keep_last: int = opt(3, "mid-epoch checkpoints (step-N.pt) to keep; older ones are deleted", report=TABLE)
    eval_every: int = opt(
        1, "evaluate every this many epochs, and after the last one", report=TABLE, elsewhere=("eval_interval",)
    )
    overwrite: bool = opt(
        False,
        "delete what an earlier run left in --out (checkpoints, metrics, TensorBoard, logs) "
        "and start over; without it, ddptrain refuses to replace an earlier run",
        node_local=True,
        report=HIDDEN,
    )
    log_to: str = opt(
        "tensorboard",
        "where the per-epoch metrics also go, a comma list of tensorboard, csv (RUN_DIR/metrics.csv), mlflow, "
        "wandb; TensorBoard and RUN_DIR/metrics.jsonl are always written",
        report=TABLE,
    )

    def trackers(self) -> List[str]:
        """--log-to as a list, without duplicates (tensorboard included when named)."""
        return list(dict.fromkeys(name.strip().lower() for name in self.log_to.split(",") if name.strip()))

    def validate(self) -> RunConfig:
        unknown = [name for name in self.trackers() if name not in TRACKERS]
        require(
            [
                (self.log_every >= 1, "--log-every must be at least 1"),
                (self.eval_every >= 1, "--eval-every must be at least 1"),
                (self.save_every_steps >= 0, "--save-every-steps must be 0 (off) or more"),
                (self.keep_last >= 1, "--keep-last must be at least 1"),
                (
                    not unknown,
                    f"--log-to {self.log_to}: {', '.join(unknown)} is not a tracker; give a comma list of "
                    f"{', '.join(TRACKERS)}",
                ),
            ]
        )
        return self


@dataclass
class LaunchConfig:
    device: str = opt("auto", "device kind", choices=["auto", "cpu", "cuda"])
    nproc: Optional[int] = opt(None, "processes on this node (launches through torchrun)", report=HIDDEN)
    nnodes: str = opt("1", "number of nodes, or MIN:MAX for an elastic job (with --rdzv-endpoint)", report=HIDDEN)
    node_rank: int = opt(0, "rank of this node (static rendezvous)", node_local=True, report=HIDDEN)
    master_addr: Optional[str] = opt(None, "address of node 0 (default 127.0.0.1 on one node)", report=HIDDEN)
    master_port: Optional[int] = opt(None, "port of node 0 (default: a free port on one node)", report=HIDDEN)
    rdzv_endpoint: Optional[str] = opt(
        None,
        "HOST:PORT of an elastic (c10d) rendezvous, the same on every node; replaces --master-addr/--node-rank",
        report=TABLE,
    )
    rdzv_id: str = opt("ddptrain", "job id shared by every node of an elastic job", report=HIDDEN)
    rdzv_conf: Optional[str] = opt(
        None,
        "more settings for an elastic job's rendezvous, KEY=VALUE[,KEY=VALUE], as torchrun's --rdzv-conf: e.g. "
        "last_call_timeout=10,keep_alive_interval=2 to re-form sooner after a node is lost (see docs/multinode.md)",
        report=TABLE,
    )
    rdzv_timeout: float = opt(
        300.0, "seconds to wait for every node to join (and for the master to answer)", report=TABLE
    )
    iface: Optional[str] = opt(
        None, "network interface for gloo/NCCL traffic between nodes (e.g. eth1)", node_local=True, report=TABLE
    )
    max_restarts: int = opt(0, "restart all workers this many times when one fails", report=TABLE)
    dist_timeout: float = opt(
        600.0,
        "seconds a collective may wait once training runs (start-up allows at least "
        "30 min); a stalled rank then fails the job, named",
        report=TABLE,
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


@dataclass(frozen=True)
class Option:
    """One option as the user sees it (flat name, flag) and where it lives in `Config`."""

    flat: str
    section: str
    attr: str
    type: type  # bool, int, float or str
    optional: bool
    default: Any
    help: str
    choices: Optional[Tuple[str, ...]]
    node_local: bool
    report: str
    elsewhere: Tuple[str, ...]

    @property
    def flag(self) -> str:
        return "--" + self.flat.replace("_", "-")


@functools.cache
def options() -> Dict[str, Option]:
    """Every option by flat name, in declaration order (the order of `config.yaml` and `--help`)."""
    found: Dict[str, Option] = {}
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            base, optional = _unwrap_optional(hints[f.name])
            meta = f.metadata
            flat = meta["flag"] or f.name
            found[flat] = Option(
                flat,
                section,
                f.name,
                base,
                optional,
                f.default,
                meta["help"],
                tuple(meta["choices"]) if meta["choices"] else None,
                meta["node_local"],
                meta["report"],
                meta["elsewhere"],
            )
    return found


def _unwrap_optional(hint) -> Tuple[type, bool]:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is typing.Union and len(args) == 1:
        return args[0], True
    return hint, False


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)
    launch: LaunchConfig = field(default_factory=LaunchConfig)

    # ---- the flat form: flags, config.yaml, the `config` entry of checkpoints ----------------------
    @classmethod
    def from_flat(cls, values: Mapping[str, Any], source: str = "the options", strict: bool = True) -> Config:
        """A Config from flat keys (`lr`, `data`). Unknown keys are errors when `strict`; otherwise (a file
        written by another ddptrain version) they are left out. Values are converted to their type."""
        known = options()
        if strict:
            check_known_keys(values, source)
        sections: Dict[str, Dict[str, Any]] = {name: {} for name in SECTIONS}
        for key, value in values.items():
            option = known.get(key)
            if option is not None:
                sections[option.section][option.attr] = coerce(option, value, source)
        return cls(**{name: SECTIONS[name](**kw) for name, kw in sections.items()})

    def to_flat(self) -> Dict[str, Any]:
        return {flat: getattr(getattr(self, o.section), o.attr) for flat, o in options().items()}

    def replace(self, **flat_values: Any) -> Config:
        """A copy with some options changed, by flat name: `cfg.replace(resume="auto")`."""
        return Config.from_flat({**self.to_flat(), **flat_values})

    def shared_values(self) -> Dict[str, Any]:
        """The options every node must agree on (node-local paths and positions left out)."""
        return {flat: value for flat, value in self.to_flat().items() if not options()[flat].node_local}

    # ---- checks that involve several fields -----------------------------------------------------
    def validate(self) -> Config:
        """Every section's checks, then nothing else: what involves several options lives here."""
        for section in (self.data, self.model, self.optim, self.run, self.launch):
            section.validate()
        return self


def channels(text: str, what: str = "a per-channel value", positive: bool = False) -> Tuple[float, ...]:
    """ "0.5,0.5,0.5" -> (0.5, 0.5, 0.5): three numbers (std: above 0), or a ConfigError saying what is wrong."""
    try:
        values = tuple(float(part) for part in text.replace(" ", "").split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or (positive and min(values) <= 0):
        kind = "three numbers above 0" if positive else "three numbers"
        raise ConfigError(f"{what} must be {kind}, one per RGB channel, such as 0.5,0.5,0.5; not {text!r}")
    return values


def channels_text(values) -> str:
    """(0.5, 0.5, 0.5) -> "0.5,0.5,0.5": how per-channel values are written in config.yaml (see `channels`)."""
    return ",".join(f"{float(v):g}" for v in values)


def require(checks: List[Tuple[bool, str]]) -> None:
    """Raise a ConfigError with the message of the first check that fails."""
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)


def _is_host_port(text: str) -> bool:
    host, _, port = text.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


# ---- types ----------------------------------------------------------------------------------------
def coerce(option: Option, value: Any, source: str) -> Any:
    """`value` as the option's type, or a ConfigError naming the key and where it came from."""
    converted, problem = _convert(option, value)
    if problem:
        raise ConfigError(f"{source}: {problem}")
    return converted


def _convert(option: Option, value: Any) -> Tuple[Any, Optional[str]]:
    """(converted value, None), or (None, what is wrong with it)."""
    if value is None:
        return None, None if option.optional else f"{option.flat} must have a value (default: {option.default})"
    converted = _CONVERTERS[option.type](value)
    if option.choices and converted not in option.choices:
        return None, f"{option.flat} must be one of {', '.join(option.choices)}, not {value!r}"
    if converted is None:
        kind = {bool: "true or false", int: "a whole number", float: "a number", str: "a text"}[option.type]
        return None, f"{option.flat} must be {kind}, not {value!r}"
    return converted, None


def _to_bool(value: Any) -> Optional[bool]:
    return value if isinstance(value, bool) else None


def _to_int(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    number = _to_float(value)
    return int(number) if number is not None and number.is_integer() else None


def _to_float(value: Any) -> Optional[float]:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):  # YAML 1.1 reads 1e-3 (no dot) as a string
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _to_str(value: Any) -> Optional[str]:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value):  # `mean: [0.5, ...]`
        return ",".join(str(v) for v in value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):  # `nnodes: 2`, `rdzv_id: 7`
        return str(value)
    return None


_CONVERTERS = {bool: _to_bool, int: _to_int, float: _to_float, str: _to_str}


# ---- flags ----------------------------------------------------------------------------------------
def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per option, grouped by section. Defaults are SUPPRESSed so we know what the user typed."""
    groups = {name: parser.add_argument_group(title) for name, title in SECTION_TITLES.items()}
    for option in options().values():
        kw: Dict[str, Any] = {"dest": option.flat, "default": argparse.SUPPRESS}
        if option.type is bool:
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw["type"] = option.type
            if option.choices:
                kw["choices"] = list(option.choices)
        shown = option.default not in (None, False)
        kw["help"] = f"{option.help} (default: {option.default})" if shown else option.help
        groups[option.section].add_argument(option.flag, **kw)


# ---- YAML -----------------------------------------------------------------------------------------
def load_yaml(path: str | Path) -> Dict[str, Any]:
    """A config file's options as flat keys, converted to their types; flat or nested form."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as error:
        raise ConfigError(f"config file {path} is not UTF-8 text ({error.reason}); save it as UTF-8") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is not valid YAML: {str(error).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of option names to values")
    flat = _flatten(data, str(path))
    check_known_keys(flat, str(path))
    converted = {key: _convert(options()[key], value) for key, value in flat.items()}
    problems = [problem for _, problem in converted.values() if problem]
    if len(problems) == 1:
        raise ConfigError(f"config file {path}: {problems[0]}")
    if problems:
        raise ConfigError(f"config file {path}: {len(problems)} values cannot be used: {'; '.join(problems)}")
    return {key: value for key, (value, _) in converted.items()}


def _flatten(data: Mapping, source: str) -> Dict[str, Any]:
    """`{optim: {lr: 0.1}, epochs: 3}` -> `{lr: 0.1, epochs: 3}`; a section given as a mapping is nested
    (`data: {path: ...}`), the same name with a plain value is the flat option (`data: /images`)."""
    flat: Dict[str, Any] = {}
    for raw_key, value in data.items():
        key = str(raw_key).replace("-", "_")
        entries = (
            _section_entries(key, value, source) if key in SECTIONS and isinstance(value, dict) else [(key, value)]
        )
        for flat_key, entry in entries:
            if flat_key in flat:
                raise ConfigError(f"option '{flat_key}' is given twice in {source} (flat and nested)")
            flat[flat_key] = entry
    return flat


def _section_entries(section: str, values: Mapping, source: str) -> List[Tuple[str, Any]]:
    by_name = {name: o.flat for o in options().values() if o.section == section for name in (o.attr, o.flat)}
    entries = []
    for raw_key, value in values.items():
        key = str(raw_key).replace("-", "_")
        if key not in by_name:
            close = difflib.get_close_matches(key, list(by_name), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"unknown option {section + '.' + key!r} in {source}{hint}")
        entries.append((by_name[key], value))
    return entries


SUGGESTION_CUTOFF = 0.85  # difflib similarity: below it, a "did you mean" misleads more than it helps
SHOWN_UNKNOWN = 12


def _likely_option(key: str, known: List[str]) -> Optional[str]:
    """The ddptrain option another tool's name stands for, or a close spelling of one."""
    for option in options().values():
        if key in option.elsewhere:
            return option.flat
    close = difflib.get_close_matches(key, known, 1, SUGGESTION_CUTOFF)
    return close[0] if close else None


def check_known_keys(values: Mapping[str, Any], source: str) -> None:
    """Every unknown option at once (a config written for another tool has dozens), each with the
    ddptrain option it most likely means when one is close."""
    known = list(options())
    unknown = [key for key in values if key not in known]
    if not unknown:
        return
    hints = {key: hint for key in unknown if (hint := _likely_option(key, known))}
    if len(unknown) == 1:
        key = unknown[0]
        hint = f"; did you mean '{hints[key]}'?" if key in hints else ""
        raise ConfigError(f"unknown option {key!r} in {source}{hint}")
    shown = ", ".join(repr(key) if not key.isprintable() or not key else key for key in unknown[:SHOWN_UNKNOWN]) + (
        f" and {len(unknown) - SHOWN_UNKNOWN} more" if len(unknown) > SHOWN_UNKNOWN else ""
    )
    likely = "; ".join(f"{key if key.isprintable() else repr(key)} -> {name}" for key, name in hints.items())
    raise ConfigError(
        f"{len(unknown)} options in {source} are not ddptrain options: {shown}"
        + (f". Perhaps: {likely}" if likely else "")
        + ". `ddptrain train --help` lists every option"
    )


def build_config(cli_values: Mapping[str, Any], config_file: Optional[str] = None) -> Config:
    """Merge the defaults, an optional YAML file and the flags the user typed; convert and validate."""
    merged: Dict[str, Any] = dict(load_yaml(config_file)) if config_file else {}
    merged.update(cli_values)
    return Config.from_flat(merged, "the command line").validate()


def save_yaml(config: Config, path: str | Path) -> None:
    """config.yaml in the flat form: `--config RUN_DIR/config.yaml` repeats the run."""
    Path(path).write_text(yaml.safe_dump(config.to_flat(), sort_keys=False))


def report_role(flat_key: str) -> str:
    """LEGEND, TABLE or HIDDEN for a key of a saved config (unknown keys: LEGEND)."""
    option = options().get(flat_key)
    return option.report if option is not None else LEGEND
