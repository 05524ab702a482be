"""The command line's parser: no abbreviated flags, every default in the help, and an unknown flag answered with
the command's own usage line and the flag it most likely means — a misspelling (`--batchsize`), or the name
another training script gives the option (`--opt`, `--sched`, `--smoothing`, `-b`)."""

from __future__ import annotations

import argparse
import difflib
from typing import List, Optional, Sequence

from .config import options
from .config.schema import SUGGESTION_CUTOFF


class HelpFormatter(argparse.HelpFormatter):
    """argparse's, with `(default: X)` after every option's help that does not already say its default."""

    def _get_help_string(self, action: argparse.Action) -> Optional[str]:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or text == argparse.SUPPRESS
            or "default" in text
            or default is None
            or isinstance(default, bool)  # a switch: off unless given
            or default in ("", [], argparse.SUPPRESS)
        ):
            return action.help
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """Every ddptrain parser: flags only in full (`--ep` is not `--epochs`), defaults shown."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def likely_flag(given: str, parser: argparse.ArgumentParser) -> Optional[str]:
    """The flag of `parser` that `given` (an unknown flag, perhaps `--name=value`) most likely means: the option
    another tool names so, else the closest spelling."""
    flags = [flag for flag in parser._option_string_actions if flag.startswith("--")]
    name = given.split("=", 1)[0]
    key = name.lstrip("-").replace("-", "_").lower()
    aliases = {  # other tools' names of this command's options: lr_warmup_epochs -> --warmup-epochs
        alias: flag
        for option in options().values()
        if (flag := "--" + option.flat.replace("_", "-")) in flags
        for alias in (*option.elsewhere, option.flat)
    }
    if key in aliases:
        return aliases[key]
    names = [flag[2:].replace("-", "_") for flag in flags]
    started = [name for name in names if name.startswith(key)]
    if len(started) == 1:  # an abbreviation argparse is told not to take: --ep for --epochs
        return "--" + started[0].replace("_", "-")
    meant = {flag for alias, flag in aliases.items() if alias.startswith(key)}
    if not started and len(meant) == 1:  # the start of another tool's name: --lr-warmup for --lr-warmup-epochs
        return meant.pop()
    close = difflib.get_close_matches(key, names, 1, SUGGESTION_CUTOFF)
    if close:
        return "--" + close[0].replace("_", "-")
    return " or ".join("--" + name.replace("_", "-") for name in started[:3]) or None


def unknown_flags(extra: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """The error for arguments `parser` does not take: each unknown flag with what it likely means."""
    flags = [arg for arg in extra if arg.startswith("-") and arg != "-"]
    if not flags:
        return f"unexpected {'argument' if len(extra) == 1 else 'arguments'}: {' '.join(extra)}"
    hints: List[str] = []
    for flag in flags:
        likely = likely_flag(flag, parser)
        hints.append(f"{flag.split('=', 1)[0]} (did you mean {likely}?)" if likely else flag.split("=", 1)[0])
    return f"unknown option{'s' if len(flags) > 1 else ''}: {', '.join(hints)}; `{parser.prog} --help` lists them"


def parse(parser: argparse.ArgumentParser, argv: List[str]) -> argparse.Namespace:
    """parse_args, with arguments a command does not take reported on that command's own parser (its usage line
    and its flags): `ddptrain train --batchsize` on train's, `ddptrain bench input --cout` on input's."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = _chosen(parser, args)
        command.error(unknown_flags(extra, command))
    return args


def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost sub-command's parser that `args` chose."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(args, action.dest, None)
            if name in action.choices:
                return _chosen(action.choices[name], args)
    return parser
