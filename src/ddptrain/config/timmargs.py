"""timm's `train.py` writes every run's options to `args.yaml`. Given as `--config`, that file is not read as a
ddptrain config (its ~180 options are timm's, and many mean something else here); it is recognised and turned
into the ddptrain flags of its recipe, with the options that have no equivalent named, so the user sees what
carries over and what does not before training anything.

Only what has the same meaning is carried: timm's `sgd` is Nesterov's (ddptrain's `nesterov`), its `momentum`
is plain SGD (`sgd`); `lr_base` becomes `--lr-base` only where timm scales it linearly. Options that change
nothing at their value (a probability of 0, an empty path) are not mentioned; logging, devices and timm's own
loaders are not part of a recipe and are left out."""

from __future__ import annotations

import shlex
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

# Options only timm's train.py writes (most of them since 2021): seven of these make a file timm's args.yaml.
SIGNATURE = ("aa", "aug_splits", "bce_loss", "jsd_loss", "resplit", "split_bn", "dist_bn", "remode", "reprob")

# timm optimizer names -> ddptrain's (timm's "sgd" is Nesterov's momentum; "momentum" is plain SGD's)
OPTIMIZERS = {
    "sgd": "nesterov",
    "nesterov": "nesterov",
    "momentum": "sgd",
    "adamw": "adamw",
    "adam": "adam",
    "lamb": "lamb",
    "lars": "lars",
    "lion": "lion",
    "nadamw": "nadamw",
    "adafactor": "adafactor",
    "rmsprop": "rmsprop",
}
MOMENTUM_OPTIMIZERS = ("sgd", "nesterov", "lars", "rmsprop")
RAND_AUGMENT_PREFIX = "rand-m"

# Options that have no ddptrain equivalent, with the value at which they change nothing, and what they do
UNCARRIED: Dict[str, Tuple[Any, str]] = {
    "cooldown_epochs": (0, "epochs at the minimum rate after the schedule"),
    "warmup_lr": (0, "the rate the warm-up starts from; ddptrain's starts from 0"),
    "warmup_prefix": (False, "warm-up outside the schedule's epochs"),
    "lr_noise": (None, "noise added to the schedule"),
    "lr_k_decay": (1.0, "k-decay of the cosine"),
    "lr_cycle_limit": (1, "restarts of the schedule"),
    "epoch_repeats": (0.0, "epochs repeated over the data"),
    "vflip": (0.0, "vertical flips"),
    "hflip": (0.5, "horizontal flips at another probability than 0.5"),
    "ratio": ([0.75, 4 / 3], "the random crop's aspect range"),
    "color_jitter_prob": (None, "colour jitter applied with a probability"),
    "grayscale_prob": (None, "random greyscale"),
    "gaussian_blur_prob": (None, "random blur"),
    "drop_block": (None, "DropBlock"),
    "drop_connect": (None, "drop-connect"),
    "bce_loss": (False, "binary cross-entropy for single-label classes"),
    "jsd_loss": (False, "AugMix's Jensen-Shannon consistency loss"),
    "aug_splits": (0, "augmentation splits"),
    "split_bn": (False, "BatchNorm per augmentation split"),
    "resplit": (False, "random erasing of the first split"),
    "bn_momentum": (None, "BatchNorm momentum"),
    "bn_eps": (None, "BatchNorm epsilon"),
    "opt_eps": (None, "the optimizer's epsilon"),
    "opt_betas": (None, "the optimizer's betas"),
    "opt_kwargs": ({}, "the optimizer's other arguments"),
    "layer_decay_min_scale": (0, "a floor for layer-wise decay"),
    "model_ema_force_cpu": (False, "the EMA kept on the CPU"),
    "kd_model_name": (None, "knowledge distillation from a teacher"),
    "train_crop_mode": (None, "another training crop"),
    "naflex_loader": (False, "NaFlex variable-resolution batches"),
    "fast_norm": (False, "timm's fused norms"),
    "head_init_scale": (None, "a scaled head initialisation"),
    "head_init_bias": (None, "a head bias initialisation"),
}
DIST_BN = "dist_bn"  # timm averages BatchNorm's running statistics over the processes after each epoch


def is_timm_args(data: Mapping[str, Any]) -> bool:
    """Whether a config file's mapping is an `args.yaml` that timm's train.py wrote."""
    return sum(key in data for key in SIGNATURE) >= 7 and "model" in data and "opt" in data


def refusal(data: Mapping[str, Any], source: str) -> str:
    """The one-line answer to `--config` given timm's args.yaml: its recipe as ddptrain flags, and what has no
    equivalent here."""
    flags, left = translate(data)
    command = shlex.join(["ddptrain", "train", *flags])
    said = (
        f"{source} is the args.yaml timm's train.py wrote, not a ddptrain config; its recipe in ddptrain's flags "
        f"is: {command}"
    )
    if left:
        said += f" — not carried over (no equivalent here): {'; '.join(left)}"
    return said + ". Put those flags on the command line (or in a config file of ddptrain's own) and run that"


def translate(data: Mapping[str, Any]) -> Tuple[List[str], List[str]]:
    """(ddptrain flags, what has no equivalent) for the options of a timm args.yaml."""
    flags: List[str] = []
    left: List[str] = []
    for step in _STEPS:
        step(data, flags, left)
    for key, (neutral, what) in UNCARRIED.items():
        if key in data and not _same(data[key], neutral) and not _unset(data[key]):
            left.append(f"{key} {_shown(data[key])} ({what})")
    if _on(data.get(DIST_BN)) and data.get(DIST_BN) != "" and not data.get("sync_bn"):
        left.append(f"{DIST_BN} {data[DIST_BN]} (BatchNorm statistics averaged over the processes each epoch)")
    return flags, left


def _add(flags: List[str], name: str, value: Any = None) -> None:
    flags.append(f"--{name}")
    if value is not None:
        flags.append(_shown(value))


def _data(data: Mapping[str, Any], flags: List[str], left: List[str]) -> None:
    folder = data.get("data") or data.get("data_dir")
    if folder:
        _add(flags, "data", folder)
    if data.get("dataset"):
        left.append(f"dataset {data['dataset']} (timm's dataset readers; give --data a folder or manifest)")
    if data.get("output"):
        _add(flags, "out", data["output"])


def _model(data: Mapping[str, Any], flags: List[str], left: List[str]) -> None:
    _add(flags, "model", f"timm:{data['model']}")
    if data.get("model_kwargs"):
        _add(flags, "model-kwargs", ",".join(f"{k}={_shown(v)}" for k, v in data["model_kwargs"].items()))
    if data.get("pretrained"):
        _add(flags, "pretrained")
    checkpoint = data.get("initial_checkpoint") or data.get("pretrained_path")
    if checkpoint:
        _add(flags, "weights", checkpoint)
    if data.get("resume"):
        _add(flags, "resume", data["resume"])
    for key, name in (("drop", "dropout"), ("drop_path", "drop-path")):
        if _on(data.get(key)):
            _add(flags, name, data[key])
    for key, name in (("channels_last", "channels-last"), ("sync_bn", "sync-bn")):
        if data.get(key):
            _add(flags, name)
    if data.get("grad_checkpointing"):
        _add(flags, "grad-checkpointing")
    if data.get("torchcompile"):
        _add(flags, "compile")


def _input(data: Mapping[str, Any], flags: List[str], left: List[str]) -> None:
    size = data.get("img_size")
    shape = data.get("input_size")
    if not size and isinstance(shape, list) and len(shape) == 3:
        if shape[1] == shape[2]:
            size = shape[1]
        else:
            left.append(f"input_size {_shown(shape)} (ddptrain trains on square images)")
    if size:
        _add(flags, "img-size", size)
    for key in ("mean", "std"):
        if data.get(key):
            _add(flags, key, ",".join(_shown(v) for v in data[key]))
    if data.get("crop_pct"):
        _add(flags, "crop-fraction", data["crop_pct"])
    if data.get("interpolation") in ("bilinear", "bicubic", "nearest"):
        _add(flags, "interpolation", data["interpolation"])
    train = data.get("train_interpolation")
    if train and train != (data.get("interpolation") or "bilinear"):
        left.append(f"train_interpolation {train} (training images resized as --interpolation says)")
    scale = data.get("scale")
    if isinstance(scale, list) and len(scale) == 2:
        _add(flags, "min-crop-scale", scale[0])
        if scale[1] != 1.0:
            left.append(f"scale {_shown(scale)} (the random crop's largest area is the whole image)")


def _augment(data: Mapping[str, Any], flags: List[str], left: List[str]) -> None:
    policy = data.get("aa")
    if policy and str(policy).startswith(RAND_AUGMENT_PREFIX):
        magnitude, _, rest = str(policy)[len(RAND_AUGMENT_PREFIX) :].partition("-")
        _add(flags, "auto-augment", "randaugment")
        _add(flags, "augment-magnitude", magnitude)
        if rest:
            left.append(f"the -{rest} of aa {policy} (timm's RandAugment variants; ddptrain's is torchvision's)")
    elif policy:
        left.append(f"aa {policy} (timm's policy; ddptrain has randaugment, trivialaugment, autoaugment)")
    elif _on(data.get("color_jitter")) and not data.get("no_aug"):
        left.append(f"color_jitter {_shown(data['color_jitter'])} (colour jitter)")
    if _on(data.get("reprob")):
        _add(flags, "random-erasing", data["reprob"])
        if data.get("remode", "const") != "const":
            left.append(f"remode {data['remode']} (ddptrain erases to black: timm's const)")
        if data.get("recount", 1) != 1:
            left.append(f"recount {data['recount']} (one erased box per image here)")
    if _on(data.get("aug_repeats")):
        _add(flags, "repeated-aug", int(data["aug_repeats"]))
    mixing = False
    for key in ("mixup", "cutmix"):
        if _on(data.get(key)):
            _add(flags, key, data[key])
            mixing = True
    if mixing:
        for key, neutral in (("mixup_prob", 1.0), ("mixup_switch_prob", 0.5), ("mixup_mode", "batch")):
            if key in data and data[key] != neutral:
                left.append(f"{key} {_shown(data[key])} (mixing every batch, Mixup or CutMix at even odds)")
        if _on(data.get("mixup_off_epoch")):
            left.append(f"mixup_off_epoch {data['mixup_off_epoch']} (mixing for the whole run)")
        if data.get("cutmix_minmax"):
            left.append(f"cutmix_minmax {_shown(data['cutmix_minmax'])} (CutMix boxes by alpha)")
    if data.get("no_aug"):
        left.append("no_aug true (ddptrain always crops and flips while training)")


def _optimizer(data: Mapping[str, Any], flags: List[str], left: List[str]) -> None:
    name = str(data.get("opt") or "sgd").lower()
    if name in OPTIMIZERS:
        _add(flags, "optimizer", OPTIMIZERS[name])
        if OPTIMIZERS[name] in MOMENTUM_OPTIMIZERS and data.get("momentum") is not None:
            _add(flags, "momentum", data["momentum"])
    else:
        left.append(f"opt {name} (ddptrain has {', '.join(sorted(set(OPTIMIZERS.values())))})")
    _learning_rate(data, name, flags, left)
    for key, flag in (("weight_decay", "weight-decay"), ("layer_decay", "layer-decay")):
        if data.get(key) is not None:
            _add(flags, flag, data[key])
    if _on(data.get("clip_grad")):
        if data.get("clip_mode", "norm") == "norm":
            _add(flags, "clip-grad", data["clip_grad"])
        else:
            left.append(f"clip_mode {data['clip_mode']} (ddptrain clips the global norm)")
    if _on(data.get("grad_accum_steps")) and data["grad_accum_steps"] != 1:
        _add(flags, "grad-accum", data["grad_accum_steps"])
    if data.get("smoothing") is not None:
        _add(flags, "label-smoothing", data["smoothing"])


def _learning_rate(data: Mapping[str, Any], name: str, flags: List[str], left: List[str]) -> None:
    if data.get("lr") is not None:
        _add(flags, "lr", data["lr"])
        return
    base, size = data.get("lr_base"), data.get("lr_base_size") or 256
    if base is None:
        return
    scaling = data.get("lr_base_scale") or ("sqrt" if any(o in name for o in ("ada", "lamb")) else "linear")
    if scaling == "linear":
        _add(flags, "lr-base", float(base) * 256 / float(size))
    else:
        left.append(
            f"lr_base {_shown(base)} with {scaling} scaling (timm's rate grows with the square root of the global "
            "batch; give --lr, the rate timm's log gave as 'Learning rate (...) calculated from base learning rate')"
        )


def _schedule(data: Mapping[str, Any], flags: List[str], left: List[str]) -> None:
    if data.get("epochs"):
        _add(flags, "epochs", data["epochs"])
    sched = data.get("sched") or "cosine"
    if sched in ("cosine", "step"):
        _add(flags, "schedule", sched)
    else:
        left.append(f"sched {sched} (ddptrain has cosine, linear, step)")
    if sched == "step":
        for key, flag in (("decay_epochs", "decay-epochs"), ("decay_rate", "decay-rate")):
            if data.get(key) is not None:
                _add(flags, flag, data[key])
    if data.get("warmup_epochs") is not None:
        _add(flags, "warmup-epochs", data["warmup_epochs"])
    if sched == "cosine" and data.get("min_lr") is not None:
        if float(data["min_lr"]) == 0:
            _add(flags, "min-lr-ratio", 0)
        elif data.get("lr"):
            _add(flags, "min-lr-ratio", float(data["min_lr"]) / float(data["lr"]))
        else:
            left.append(f"min_lr {_shown(data['min_lr'])} (a ratio of --lr here: --min-lr-ratio)")
    if data.get("sched_on_updates") is False:
        left.append("sched_on_updates false (timm sets the rate once an epoch; ddptrain at every step)")


def _run(data: Mapping[str, Any], flags: List[str], left: List[str]) -> None:
    if data.get("batch_size"):
        _add(flags, "batch-size", data["batch_size"])
    if data.get("amp"):
        _add(flags, "amp", "bf16" if data.get("amp_dtype") == "bfloat16" else "fp16")
    elif "amp" in data:
        _add(flags, "amp", "off")
    if data.get("model_ema"):
        _add(flags, "ema-decay", data.get("model_ema_decay") or 0.9998)
        if "model_ema_warmup" in data and not data["model_ema_warmup"]:
            _add(flags, "no-ema-warmup")
    if data.get("eval_metric") in ("top1", "top5", "loss"):
        _add(flags, "eval-metric", data["eval_metric"])
    for key, flag in (("seed", "seed"), ("workers", "workers")):
        if data.get(key) is not None:
            _add(flags, flag, data[key])


_STEPS: List[Callable[[Mapping[str, Any], List[str], List[str]], None]] = [
    _data,
    _model,
    _input,
    _augment,
    _optimizer,
    _schedule,
    _run,
]


def _on(value: Any) -> bool:
    """A number option set to something other than 0 / None."""
    return value not in (None, "", False) and value != 0


def _unset(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _same(value: Any, neutral: Any) -> bool:
    if isinstance(value, list) and isinstance(neutral, list):
        return len(value) == len(neutral) and all(abs(float(a) - float(b)) < 1e-6 for a, b in zip(value, neutral))
    if isinstance(value, (int, float)) and isinstance(neutral, (int, float)) and not isinstance(value, bool):
        return abs(float(value) - float(neutral)) < 1e-12
    return value == neutral


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return str(value)


def timm_args_refusal(data: Mapping[str, Any], source: str) -> Optional[str]:
    """`refusal` for timm's args.yaml, None for any other mapping."""
    return refusal(data, source) if is_timm_args(data) else None
