"""Command line: train, eval, predict, export, make-dataset, shard, fetch-weights, doctor, bench, lint, report, demo.

`train` and `eval` with --nproc/--nnodes start themselves again under torchrun; the started
workers parse the same command line and do the work. Nothing here imports torch: `--help`, `lint`,
`report` and `make-dataset` start in a fraction of a second, and `train` checks its inputs before
anything heavy is loaded or any process is started.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import logging
import os
import sys
from pathlib import Path
from typing import List, Optional

from .cliparse import Parser, parse
from .config import Config, LaunchConfig, add_config_flags, add_option_flags, build_config, options
from .errors import ConfigError, DdptrainError
from .logs import setup_logging
from .runtime.env import LAUNCH_DIR_ENV, detect, inside_worker
from .runtime.explain import explain
from .runtime.preempt import Preempted
from .runtime.startup import StartupClock, forget_command_start, mark_command_start
from .tools import PER_CLASS
from .version import __version__

log = logging.getLogger("ddptrain")


def _add_legacy_local_rank(parser: argparse.ArgumentParser) -> None:
    # torch.distributed.launch without --use-env passes --local-rank=N (older: --local_rank).
    parser.add_argument(
        "--local-rank", "--local_rank", dest="local_rank", type=int, default=None, help=argparse.SUPPRESS
    )


def _add_trust_torchscript(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trust-torchscript",
        action="store_true",
        help="load a *.torchscript.pt model: this runs code from the file, so only for files you trust",
    )


def _add_ema(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ema", action="store_true", help="use the checkpoint's EMA weights (a run trained with --ema-decay)"
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def _add_progress_every(parser: argparse.ArgumentParser, counted: str) -> None:
    parser.add_argument(
        "--progress-every",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help=f"where stderr is not a terminal (a job log, a pipe), a line of {counted}, rate and time left at least "
        "this often instead of a progress bar (default 30; 0: none)",
    )


def _add_verbose(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--verbose", action="store_true", help="also show torchrun's own log lines")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="ddptrain",
        description="Image-classification training on 1..N processes, one node or many (PyTorch DDP / FSDP).",
        epilog="`ddptrain COMMAND --help` gives a command's options, each with its default.",
    )
    parser.add_argument("--version", action="version", version=f"ddptrain {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    _add_training_commands(sub)
    _add_model_file_commands(sub)
    _add_tool_commands(sub)
    return parser


def _add_training_commands(sub) -> None:
    train = sub.add_parser(
        "train",
        help="train a classifier on 1..N processes",
        usage="ddptrain train --data DATA [--out DIR] [--model NAME] [--epochs N] [--nproc N] [--config FILE] [...]",
    )
    train.add_argument("--config", default=None, help="YAML file of options; flags override it")
    _add_verbose(train)
    add_config_flags(train)
    _add_legacy_local_rank(train)

    ev = sub.add_parser("eval", help="exact metrics of a checkpoint on a data folder (prints JSON)")
    ev.add_argument("--checkpoint", required=True, help="a checkpoint, or an exported .safetensors/TorchScript file")
    ev.add_argument(
        "--data",
        help="the data to score, in any form train reads (default: the data the checkpoint's run trained on, from "
        "the config.yaml of its run folder)",
    )
    ev.add_argument(
        "--split",
        choices=["val", "all"],
        default="val",
        help="val: the training run's validation split (default); all: every image in --data",
    )
    add_option_flags(ev, ["batch_size", "workers", "device", "amp", "nproc", "dist_timeout", "decode"])  # as for train
    _add_progress_every(ev, "batches evaluated")
    _add_trust_torchscript(ev)
    _add_ema(ev)
    _add_verbose(ev)
    _add_legacy_local_rank(ev)


def _add_model_file_commands(sub) -> None:
    pr = sub.add_parser(
        "predict", help="top-k classes for image files or folders, or every image of a --data (one JSON per image)"
    )
    pr.add_argument("--checkpoint", required=True, help="a checkpoint, or an exported .safetensors/TorchScript file")
    pr.add_argument("paths", nargs="*", metavar="PATH", help="image files, or folders searched for images")
    pr.add_argument(
        "--data",
        action="append",
        default=[],
        help="every image of data in any form train reads (a tar set, a shard set, a Hugging Face dataset, a "
        "manifest, S3...), named as its source names them; may be given more than once",
    )
    pr.add_argument("--topk", type=int, default=5)
    add_option_flags(pr, ["batch_size", "device"])  # as for train
    _add_progress_every(pr, "images predicted (to stderr, where the output is not a terminal)")
    _add_trust_torchscript(pr)
    _add_ema(pr)

    ex = sub.add_parser(
        "export", help="write a checkpoint's model as safetensors, TorchScript or ONNX (class names beside it)"
    )
    ex.add_argument("--checkpoint", required=True)
    ex.add_argument(
        "--format",
        required=True,
        choices=["safetensors", "torchscript", "onnx"],
        help="onnx needs the onnx package installed",
    )
    _add_ema(ex)
    ex.add_argument("--out", default=None, help="output file (default: next to the checkpoint, e.g. best.safetensors)")


def _add_tool_commands(sub) -> None:
    _add_data_commands(sub)
    _add_machine_commands(sub)
    _add_reading_commands(sub)


def _add_data_commands(sub) -> None:
    _add_make_dataset(sub)
    _add_shard(sub)


def _add_make_dataset(sub) -> None:
    mk = sub.add_parser(
        "make-dataset",
        help="write the embedded demo dataset (deterministic photo-like JPEGs of coloured shapes on cluttered backgrounds)",
    )
    mk.add_argument("--out", required=True, help="folder to write: one sub-folder of JPEGs per class")
    mk.add_argument(
        "--classes",
        type=int,
        default=5,
        help="number of classes, 2-8: the first N of disc, ring, star, cross, triangle, square, hexagon, crescent",
    )
    mk.add_argument(
        "--per-class",
        type=int,
        default=PER_CLASS,
        help="images per class: about what a model from random weights needs to learn the shapes in 10 epochs "
        "without recipe flags; fewer make a quicker try that learns less",
    )
    mk.add_argument("--seed", type=int, default=0, help="the same seed writes the same images")


def _add_shard(sub) -> None:
    sh = sub.add_parser(
        "shard",
        help="write any --data train reads (a folder, a manifest, a tar set) as WebDataset tar shards + an index, for --data "
        "SHARDS/ or a URL",
    )
    sh.add_argument("--data", required=True, help="the data, in any form train reads but a shard set")
    sh.add_argument("--out", required=True, help="folder for train-NNNNNN.tar, val-NNNNNN.tar and shards.json")
    sh.add_argument("--shard-size", default="1GB", help="largest shard (default 1GB; e.g. 500MB)")
    sh.add_argument(
        "--val-split",
        type=float,
        default=options()["val_split"].default,
        help="as for train (and with its default): fraction of each class held out",
    )
    seed = options()["seed"].default
    sh.add_argument(
        "--seed",
        type=int,
        default=seed,
        help=f"as for train (and with its default, {seed}): the split, and the order within shards",
    )
    sh.add_argument("--overwrite", action="store_true", help="replace a shard set already in --out")
    _add_progress_every(sh, "images written")
    sh.add_argument("--label-key", default=options()["label_key"].default, help=options()["label_key"].help)
    sh.add_argument(
        "--max-side",
        type=int,
        default=None,
        help="re-encode images whose longer side is over this many pixels, once, as JPEGs with that side (e.g. 320 "
        "or 384 for 224-px training): every epoch then decodes less; recorded in the index and in runs on the set",
    )
    sh.add_argument("--quality", type=int, default=90, help="with --max-side: the JPEG quality (1-100, default 90)")
    sh.add_argument(
        "--restart-markers",
        action="store_true",
        help="rewrite each JPEG losslessly (the same pixels) with restart markers every few blocks, so that a "
        "training crop decodes only the part of the image it needs: faster input for a few %% more or fewer bytes "
        "(default: images stored as they are)",
    )
    sh.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="processes that re-encode images for --max-side and --restart-markers (default: this machine's CPUs)",
    )


def _add_machine_commands(sub) -> None:
    fw = sub.add_parser(
        "fetch-weights",
        help="download a model's pretrained weights into the libraries' cache (TORCH_HOME, the Hugging Face cache), "
        "for --pretrained on machines without network",
    )
    fw.add_argument("models", nargs="+", metavar="MODEL", help="as for --model: resnet34, timm:vit_small_patch16_224")

    doc = sub.add_parser("doctor", help="check this machine and run a real N-process collective test")
    doc.add_argument(
        "--nproc", type=int, default=None, help="processes for the smoke test (default: the visible GPUs, or 2 on CPU)"
    )
    doc.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    doc.add_argument(  # a port to test, not a rendezvous  # ddptrain: ignore[DDP011]
        "--master-port", type=int, default=29500, help="the port to check is free (default 29500)"
    )
    doc.add_argument("--timeout", type=float, default=120.0, help="seconds a collective may wait")
    doc.add_argument("--json", action="store_true", help="one JSON object for machines")

    bench = sub.add_parser(
        "bench", help="benchmarks: overhead, scaling, precision, input, startup, recipe, store, memory"
    )
    from .tools.bench import add_arguments as add_bench_arguments

    add_bench_arguments(bench)


def _add_reading_commands(sub) -> None:
    lint = sub.add_parser("lint", help="check your own DDP training script for common mistakes (static)")
    lint.add_argument("paths", nargs="+", metavar="FILE", help="Python files or folders")
    lint.add_argument("--json", action="store_true", help="one JSON object instead of lines (as --format json)")
    lint.add_argument(
        "--format",
        choices=["text", "json", "github", "sarif"],
        default="text",
        help="text: file:line RULE severity message -> fix; json: one object; github: GitHub Actions annotations; "
        "sarif: SARIF 2.1.0 for code-scanning pages",
    )
    lint.add_argument("--strict", action="store_true", help="exit 1 on warnings too (by default only on errors)")
    lint.add_argument(
        "--select",
        default="",
        help="comma-separated rules, rule prefixes or categories to report (ddp, security, ALL; default: ddp — "
        "every rule but DDP008's weights_only=False, which is in security)",
    )
    lint.add_argument("--ignore", default="", help="comma-separated rules, prefixes or categories left out")
    lint.add_argument(
        "--fix",
        action="store_true",
        help="apply the safe mechanical fixes (DDP002 set_epoch, DDP007 model.module, DDP009 unscale_, DDP011 "
        "setdefault, DDP013 local device, DDP018 DistributedSampler) in place; each kept only if the file still "
        "parses and lints clean of it",
    )
    lint.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; write nothing")
    lint.add_argument(
        "--jobs",
        type=int,
        default=0,
        metavar="N",
        help="processes reading paths of different repositories side by side (default 0: one per CPU; 1: none; "
        "--fix and --diff use one)",
    )
    lint.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help="where the reports of repositories are kept, used again while none of the files they read changed "
        "(compared by content; default: $DDPTRAIN_LINT_CACHE, else ~/.cache/ddptrain/lint)",
    )
    lint.add_argument("--no-cache", action="store_true", help="read everything again; keep nothing")

    rep = sub.add_parser(
        "report",
        help="report.html (open it in a browser), figures (PNG) and report.md from one or more run directories",
    )
    rep.add_argument("runs", nargs="+", metavar="RUN_DIR", help="--out folders of training runs; several are overlaid")
    rep.add_argument(
        "--out", default=None, help="output folder (default: RUN_DIR/report for one run, ./report for several)"
    )

    demo = sub.add_parser("demo", help="make the demo data, train on 2 CPU processes (or all GPUs), evaluate, predict")
    demo.add_argument("--data", default="data/demo")
    demo.add_argument("--out", default="runs/demo")
    demo.add_argument("--epochs", type=int, default=None)
    demo.add_argument("--nproc", type=int, default=None)
    demo.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")


def train_config(args: argparse.Namespace) -> Config:
    """The typed, validated Config of a parsed `train` command line: --config file, then the flags typed."""
    given = {k: v for k, v in vars(args).items() if k not in ("command", "config", "local_rank", "verbose")}
    return build_config(given, args.config)


def cmd_train(args: argparse.Namespace, argv: List[str], clock: StartupClock) -> int:
    cfg = train_config(args)
    if not inside_worker():
        from .checks import check_before_start

        check_before_start(cfg)
        if cfg.launch.uses_launcher:
            return _launch(cfg.launch, argv, args.verbose, _run_record(Path(cfg.run.out), bool(cfg.run.resume)))
    from .train.job import run

    clock.mark("imports")
    env = detect(os.environ, args.local_rank)
    setup_logging(env.rank, env.world_size)
    run(cfg, env, clock, report=_report_folder)
    return 0


def _report_folder(run_dir: Path) -> Path:
    """`ddptrain report RUN_DIR`'s figures, for the --log-to trackers that take files (tools/ is above train/)."""
    from .tools.report import write_report

    return write_report([run_dir], thumbnails=False).parent  # at the end of training: no second pass over images


def _launch(spec: LaunchConfig, argv: List[str], verbose: bool, run=None) -> int:
    from .runtime.dist import resolve_device_kind
    from .runtime.launch import RunRecord, check_nproc, launch

    check_nproc(spec.nproc or 1, resolve_device_kind(spec.device))
    return launch(spec, argv, verbose, run or RunRecord())


def _run_record(run_dir: Path, resuming: bool = False):
    """What the launcher may say about the run in `run_dir` once its workers are gone (see runtime.launch)."""
    from .runtime.launch import RunRecord
    from .train.rundir import existing_run, stopped_since

    return RunRecord(
        has_checkpoint=lambda: "checkpoints" in (existing_run(run_dir) or ""),
        stopped_at_step=lambda since: stopped_since(run_dir, since),
        resuming=resuming,
    )


def cmd_eval(args: argparse.Namespace, argv: List[str], clock: StartupClock) -> int:
    if not inside_worker():
        from .checks import check_eval_inputs

        check_eval_inputs(Path(args.checkpoint), args.data)
        if (args.nproc or 1) > 1:
            return _launch(LaunchConfig(nproc=args.nproc, device=args.device), argv, args.verbose)
    from .checks import runs_own_data
    from .tools.inference import EvalOptions, run_eval

    env = detect(os.environ, args.local_rank)
    setup_logging(env.rank, env.world_size)
    run_eval(
        EvalOptions(
            checkpoint=args.checkpoint,
            data=args.data or runs_own_data(Path(args.checkpoint)),
            split=args.split,
            batch_size=args.batch_size,
            workers=args.workers,
            device=args.device,
            amp=args.amp,
            dist_timeout=args.dist_timeout,
            trust_torchscript=args.trust_torchscript,
            ema=args.ema,
            decode=args.decode,
            progress_every=args.progress_every,
        ),
        env,
    )
    return 0


def cmd_predict(args: argparse.Namespace, argv: List[str], clock: StartupClock) -> int:
    from .tools.inference import run_predict

    setup_logging(0, 1)
    if not args.paths and not args.data:
        raise ConfigError("predict needs image files or folders (PATH ...), or --data")
    return run_predict(
        args.checkpoint,
        args.paths,
        args.topk,
        args.device,
        args.batch_size,
        trust_torchscript=args.trust_torchscript,
        ema=args.ema,
        data=args.data,
        progress_every=args.progress_every,
    )


def cmd_export(args: argparse.Namespace, argv: List[str], clock: StartupClock) -> int:
    from .tools.export import export
    from .tools.modelfile import sidecar_path

    setup_logging(0, 1)
    path = export(args.checkpoint, args.format, args.out, args.ema)
    print(path)
    print(sidecar_path(path))
    return 0


def cmd_make_dataset(args: argparse.Namespace, argv: List[str], clock: StartupClock) -> int:
    from .tools.demodata import make_dataset

    setup_logging(0, 1)
    out = make_dataset(args.out, args.classes, args.per_class, args.seed)
    log.info("wrote %d images in %d classes to %s", args.classes * args.per_class, args.classes, out)
    return 0


def cmd_shard(args: argparse.Namespace, argv: List[str], clock: StartupClock) -> int:
    from .tools.shard import make_shards

    setup_logging(0, 1)
    from .data.presize import Presize
    from .data.sources import Reading
    from .runtime.env import available_cpus

    reading = Reading(label_key=args.label_key)
    presize = Presize(args.max_side, args.quality) if args.max_side is not None else None
    make_shards(
        args.data,
        args.out,
        args.shard_size,
        args.val_split,
        args.seed,
        args.overwrite,
        reading,
        presize,
        args.progress_every,
        args.restart_markers,
        args.jobs if args.jobs is not None else available_cpus(),
    )
    return 0


def cmd_doctor(args: argparse.Namespace, argv: List[str], clock: StartupClock) -> int:
    import torch

    from .runtime.dist import resolve_device_kind
    from .runtime.launch import check_nproc
    from .tools.doctor import DoctorOptions, run_doctor, worker_main

    kind = resolve_device_kind(args.device) if args.device != "cuda" else "cuda"
    nproc = args.nproc or (max(1, torch.cuda.device_count()) if kind == "cuda" else 2)
    options = DoctorOptions(nproc, kind, args.master_port, args.timeout, args.json)
    if inside_worker():
        env = detect(os.environ)
        setup_logging(env.rank, env.world_size)
        return worker_main(options, env)
    setup_logging(0, 1)
    if nproc > 1:
        check_nproc(nproc, kind)
    return run_doctor(options, argv)


def cmd_bench(args: argparse.Namespace, argv: List[str], clock: StartupClock) -> int:
    from .tools.bench import run_bench

    setup_logging(0, 1)
    return run_bench(args)


def cmd_lint(args: argparse.Namespace, argv: List[str], clock: StartupClock) -> int:
    from .tools.lint import run_lint
    from .tools.lint.cache import default_folder

    cache = None if args.no_cache else Path(args.cache_dir) if args.cache_dir else default_folder()

    return run_lint(
        args.paths,
        args.json,
        strict=args.strict,
        chosen=[t for t in args.select.split(",") if t.strip()],
        left_out=[t for t in args.ignore.split(",") if t.strip()],
        style=args.format,
        fix=args.fix,
        diff=args.diff,
        jobs=args.jobs,
        cache_folder=cache,
    )


def cmd_report(args: argparse.Namespace, argv: List[str], clock: StartupClock) -> int:
    from .tools.report import write_report

    setup_logging(0, 1)
    print(write_report(args.runs, args.out).with_name("report.html"))  # the page to open; report.md beside it
    return 0


def cmd_fetch_weights(args: argparse.Namespace, argv: List[str], clock: StartupClock) -> int:
    """One line per model: where its weights are, and whether they were downloaded now or already cached."""
    from .models.pretrained import fetch

    setup_logging(0, 1)
    for name in args.models:
        path, downloaded = fetch(name)
        print(f"{name}: {'downloaded to' if downloaded else 'already in the cache:'} {path}", flush=True)
    return 0


def cmd_demo(args: argparse.Namespace, argv: List[str], clock: StartupClock) -> int:
    from .tools.demo import run_demo

    setup_logging(0, 1)
    return run_demo(args.data, args.out, args.epochs, args.nproc, args.device)


COMMANDS = {
    "train": cmd_train,
    "eval": cmd_eval,
    "predict": cmd_predict,
    "export": cmd_export,
    "report": cmd_report,
    "make-dataset": cmd_make_dataset,
    "shard": cmd_shard,
    "lint": cmd_lint,
    "doctor": cmd_doctor,
    "fetch-weights": cmd_fetch_weights,
    "bench": cmd_bench,
    "demo": cmd_demo,
}


_FREEZE_AT_EXIT = False


def main(argv: Optional[List[str]] = None) -> int:
    marked = mark_command_start()
    try:
        return _main(argv)
    finally:
        if marked:
            forget_command_start()


def _main(argv: Optional[List[str]]) -> int:
    # Registered first, so it runs after every other exit handler: the objects left then (torch's modules and
    # tensors) are kept out of the interpreter's last cycle collections, which otherwise take 1-2 s per process
    # after the work is done. Files and sinks are closed explicitly before this point.
    global _FREEZE_AT_EXIT
    if not _FREEZE_AT_EXIT:  # once, however often a program calls main()
        atexit.register(gc.freeze)
        _FREEZE_AT_EXIT = True
    clock = StartupClock()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(build_parser(), argv)
    try:
        return _run(args, argv, clock)
    except Preempted as stopped:  # every rank stops; one message is enough
        if detect().is_main:
            print(f"ddptrain {args.command}: {stopped}", file=sys.stderr, flush=True)
        return stopped.exit_code
    except DdptrainError as error:
        _print_error(args.command, error)
        return error.exit_code
    except KeyboardInterrupt:
        print(f"ddptrain {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `ddptrain predict ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except Exception as error:  # under a launcher, the launcher explains it once for all ranks
        hint = explain(str(error))
        if hint and detect().launcher == "single":
            print(f"ddptrain {args.command}: {hint}", file=sys.stderr, flush=True)
        raise


def _print_error(command: str, error: DdptrainError) -> None:
    """One line: the command, the rank when there are several, the message. An error every rank raises alike
    (`every_rank`) is printed by each node's local rank 0 alone: once per node, never lost when nodes differ."""
    try:
        env = detect()
    except DdptrainError:
        env = None
    rank = error.rank if error.rank is not None else (env.rank if env else 0)
    if error.every_rank and env is not None and env.local_rank != 0:
        return
    if error.summary_key and env is not None and env.world_size > 1 and not _first_to_report(error.summary_key):
        return
    where = f"rank {rank}: " if env is not None and env.world_size > 1 else ""
    print(f"ddptrain {command}: error: {where}{error}", file=sys.stderr, flush=True)


def _first_to_report(key: str) -> bool:
    """Whether this process is the first of its node to report an error of kind `key` in this job (attempt): a
    token file made with O_EXCL in the launcher's scratch folder (else the temporary folder) decides."""
    import hashlib
    import tempfile

    job = ":".join(os.environ.get(name, "") for name in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT"))
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    name = hashlib.sha1(f"{job}:{attempt}:{key}".encode()).hexdigest()[:20]
    try:
        folder = Path(os.environ.get(LAUNCH_DIR_ENV) or tempfile.gettempdir())  # the launcher's: removed at its end
        os.close(os.open(folder / f"ddptrain-reported-{name}", os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return False
    except OSError:
        return True
    return True


def _run(args: argparse.Namespace, argv: List[str], clock: StartupClock) -> int:
    """Inside a torchrun worker, record an unexpected exception so the launcher prints this rank's traceback."""
    command = COMMANDS[args.command]
    if inside_worker():
        from .runtime.errorfile import recorded

        return int(recorded(command)(args, argv, clock) or 0)
    return command(args, argv, clock)
