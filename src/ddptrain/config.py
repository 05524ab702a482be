"""The one typed configuration of a training run: defaults < YAML file < command-line flags.

Each field carries its own help text, so the `train` flags, the saved `config.yaml` and this
class never drift apart.
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Optional, Tuple

import yaml

from .errors import ConfigError


def _opt(default: Any, help: str, **argparse_kw: Any) -> Any:
    return field(default=default, metadata={"help": help, **argparse_kw})


@dataclass
class Config:
    # data
    data: Optional[str] = _opt(None, "folder of class sub-folders (or with train/ and val/ inside)")
    out: str = _opt("runs/exp", "run directory: checkpoints, logs, metrics")
    val_split: float = _opt(0.2, "fraction of each class held out for validation")
    img_size: int = _opt(224, "training and evaluation image size in pixels")
    min_crop_scale: float = _opt(0.08, "smallest RandomResizedCrop area fraction")
    workers: Optional[int] = _opt(None, "DataLoader workers per process (default: CPUs per process, at most 8)")
    # model
    model: str = _opt("resnet18", "torchvision model name, or timm:NAME for a timm model")
    weights: Optional[str] = _opt(None, "local state dict or checkpoint to start from (never downloaded)")
    freeze_backbone: bool = _opt(False, "train only the classifier head")
    sync_bn: bool = _opt(False, "convert BatchNorm to SyncBatchNorm when more than one process")
    channels_last: bool = _opt(False, "use channels_last memory format")
    compile: bool = _opt(False, "torch.compile the model (before the DDP wrap)")
    grad_compress: str = _opt("off", "cast gradients for the all-reduce (halves the bytes on the wire)",
                              choices=["off", "bf16", "fp16"])
    # optimisation
    epochs: int = _opt(10, "number of epochs")
    batch_size: int = _opt(32, "batch size per process (global batch = this x processes x grad-accum)")
    optimizer: str = _opt("sgd", "optimizer", choices=["sgd", "adamw"])
    lr: float = _opt(0.05, "peak learning rate for the global batch")
    momentum: float = _opt(0.9, "SGD momentum")
    weight_decay: float = _opt(1e-4, "weight decay (never applied to norm layers and biases)")
    warmup_epochs: float = _opt(1.0, "linear warmup length in epochs, then cosine decay per step")
    min_lr_ratio: float = _opt(0.01, "final learning rate as a fraction of --lr")
    label_smoothing: float = _opt(0.0, "label smoothing for the cross-entropy loss")
    amp: str = _opt("auto", "mixed precision: auto = bf16 on capable CUDA, off on CPU",
                    choices=["auto", "bf16", "fp16", "off"])
    clip_grad: Optional[float] = _opt(None, "clip the global gradient norm to this value")
    grad_accum: int = _opt(1, "micro-batches per optimizer step")
    seed: int = _opt(42, "seed for the split, the shuffling and the augmentations")
    # run control
    resume: Optional[str] = _opt(None, "'auto' (last.pt in the run dir when present) or a checkpoint path")
    stop_after_epochs: Optional[int] = _opt(
        None, "train at most this many epochs in this invocation, then exit (resume later)")
    log_every: int = _opt(10, "steps between loss reductions, progress updates and TensorBoard points; "
                              "also how often the ranks check for a stop signal (SIGTERM/SIGUSR1)")
    save_every_steps: int = _opt(0, "also checkpoint every this many optimizer steps, mid-epoch "
                                    "(0: only at epoch ends)")
    keep_last: int = _opt(3, "mid-epoch checkpoints (step-N.pt) to keep; older ones are deleted")
    # devices and processes
    device: str = _opt("auto", "device kind", choices=["auto", "cpu", "cuda"])
    nproc: Optional[int] = _opt(None, "processes on this node (launches through torchrun)")
    nnodes: str = _opt("1", "number of nodes, or MIN:MAX for an elastic job (with --rdzv-endpoint)")
    node_rank: int = _opt(0, "rank of this node (static rendezvous)")
    master_addr: Optional[str] = _opt(None, "address of node 0 (default 127.0.0.1 on one node)")
    master_port: Optional[int] = _opt(None, "port of node 0 (default: a free port on one node)")
    rdzv_endpoint: Optional[str] = _opt(None, "HOST:PORT of an elastic (c10d) rendezvous, the same on every "
                                              "node; replaces --master-addr/--node-rank")
    rdzv_id: str = _opt("ddptrain", "job id shared by every node of an elastic job")
    rdzv_timeout: float = _opt(300.0, "seconds to wait for every node to join (and for the master to answer)")
    iface: Optional[str] = _opt(None, "network interface for gloo/NCCL traffic between nodes (e.g. eth1)")
    max_restarts: int = _opt(0, "restart all workers this many times when one fails")
    dist_timeout: float = _opt(600.0, "seconds a collective may wait once training runs (start-up allows "
                                      "at least 30 min); a stalled rank then fails the job, named")

    @property
    def uses_launcher(self) -> bool:
        """True when this invocation must start worker processes through torchrun."""
        return ((self.nproc or 1) > 1 or self.node_range()[1] > 1 or self.max_restarts > 0
                or self.rdzv_endpoint is not None)

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

    def validate(self) -> "Config":
        checks = [
            (self.data is not None, "--data is required: a folder of class sub-folders"),
            (0.0 <= self.val_split < 1.0, "--val-split must be in [0, 1)"),
            (self.img_size >= 8, "--img-size must be at least 8"),
            (0.0 < self.min_crop_scale <= 1.0, "--min-crop-scale must be in (0, 1]"),
            (self.epochs >= 1, "--epochs must be at least 1"),
            (self.batch_size >= 1, "--batch-size must be at least 1"),
            (self.grad_accum >= 1, "--grad-accum must be at least 1"),
            (self.lr > 0, "--lr must be positive"),
            (self.clip_grad is None or self.clip_grad > 0, "--clip-grad must be positive"),
            (self.workers is None or self.workers >= 0, "--workers must be 0 or more"),
            (self.nproc is None or self.nproc >= 1, "--nproc must be at least 1"),
            (self.rdzv_endpoint is not None or self.node_range()[0] == self.node_range()[1],
             "--nnodes MIN:MAX (elastic) needs --rdzv-endpoint HOST:PORT"),
            (self.rdzv_endpoint is not None or 0 <= self.node_rank < self.node_range()[1],
             "--node-rank must be in [0, --nnodes)"),
            (self.rdzv_endpoint is None or _is_host_port(self.rdzv_endpoint), "--rdzv-endpoint must be HOST:PORT"),
            (self.rdzv_timeout > 0, "--rdzv-timeout must be positive"),
            (self.dist_timeout > 0, "--dist-timeout must be positive"),
            (self.log_every >= 1, "--log-every must be at least 1"),
            (self.save_every_steps >= 0, "--save-every-steps must be 0 (off) or more"),
            (self.keep_last >= 1, "--keep-last must be at least 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _is_host_port(text: str) -> bool:
    host, _, port = text.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """Add one flag per Config field. Defaults are SUPPRESSed so we know what the user typed."""
    for f in fields(Config):
        kw: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS}
        help_text = f.metadata["help"]
        if f.type in ("bool", bool):
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw["type"] = _scalar_type(f.type)
            if "choices" in f.metadata:
                kw["choices"] = f.metadata["choices"]
        default = f.default
        kw["help"] = f"{help_text} (default: {default})" if default not in (None, False) else help_text
        parser.add_argument(flag_name(f.name), **kw)


def _scalar_type(annotation: Any):
    text = str(annotation)
    if "float" in text:
        return float
    if "int" in text:
        return int
    return str


def load_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of option names to values")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def check_known_keys(values: dict, source: str) -> None:
    known = [f.name for f in fields(Config)]
    for key in values:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"unknown option '{key}' in {source}{hint}")


def build_config(cli_values: dict, config_file: Optional[str] = None) -> Config:
    """Merge dataclass defaults, an optional YAML file and the flags the user typed."""
    merged: dict = {}
    if config_file:
        file_values = load_yaml(config_file)
        check_known_keys(file_values, config_file)
        merged.update(file_values)
    merged.update(cli_values)
    return Config(**merged).validate()


def save_yaml(config: Config, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
