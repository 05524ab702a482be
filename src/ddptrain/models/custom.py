"""Models of the user's own: `--model path/to/file.py:FACTORY` or `--model package.module:FACTORY`, any callable
that returns an `nn.Module` for `num_classes` (with `--model-kwargs`, and the regularisation rates when it takes
them). What a factory may declare about its input — timm's `pretrained_cfg` convention, as an attribute of the
factory — becomes the run's default preprocessing.

A file is imported under a module name of its own (its folder first on `sys.path`, so that it can import the files
beside it); a module by its dotted name, from the current folder or `PYTHONPATH`. Every failure to import, find or
call the factory is a `ModelSourceError` naming the model, what happened and what to do."""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib
import importlib.util
import inspect
import logging
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from torch import nn

from .. import handed
from ..errors import ConfigError
from ..util import first_line

log = logging.getLogger("ddptrain")
# the argument names a factory may give each rate, in the order they are looked for
RATE_NAMES = {"drop_path": ("drop_path_rate", "drop_path"), "dropout": ("drop_rate", "dropout")}


class ModelSourceError(ConfigError):
    """A model of the user's own that cannot be imported, found or built here."""

    every_rank = True


def load_factory(name: str) -> Callable[..., Any]:
    """The callable `name` (`file.py:FACTORY` or `module:FACTORY`) names, imported once per process; one handed to
    `ddptrain.fit` in this process is taken as it is (a model object: a copy of it per call)."""
    given = handed.lookup(name)
    if given is not None:
        return Copies(given) if isinstance(given, nn.Module) else given
    if name.startswith(handed.OBJECT_PREFIX):
        raise ModelSourceError(handed.absent(name))
    where, _, attr = name.rpartition(":")
    module = _import_file(where) if where.endswith(".py") else _import_module(where)
    found: Any = module
    for part in attr.split("."):  # `models.py:Net.small` for a classmethod
        if not hasattr(found, part):
            callables = sorted(
                n for n, v in vars(module).items() if callable(v) and not n.startswith("_") and _defined_in(v, module)
            )
            listed = f"; it defines {', '.join(callables[:12])}" if callables else ""
            raise ModelSourceError(f"--model {name}: {where} has no '{attr}'{listed}")
        found = getattr(found, part)
    if not callable(found):
        raise ModelSourceError(f"--model {name}: '{attr}' is a {type(found).__name__}, not a function or class")
    return found


class Copies:
    """A model object handed to `ddptrain.fit`, as a factory: each call gives a copy of it (its own weights, the
    same on every rank: the object was made once, in the calling process)."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.__qualname__ = type(model).__qualname__

    def __call__(self, num_classes: int) -> nn.Module:
        return copy.deepcopy(self.model)


def _defined_in(value: Any, module: Any) -> bool:
    return getattr(value, "__module__", None) == module.__name__


@functools.cache
def _import_file(where: str) -> Any:
    path = Path(where)
    if path.exists() and not path.is_file():
        raise ModelSourceError(f"model file {path} is not a regular file: name the .py file the factory is in")
    if not path.is_file():
        raise ModelSourceError(
            f"model file {path} does not exist on this machine: the model is built from that file, so put it (and the "
            "files it imports) at that path"
        )
    # a name of its own per file, so two model files both called model.py do not replace each other
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    module_name = f"ddptrain_model_{_identifier(path.stem)}_{digest}"
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # the file's own imports of the files beside it
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ModelSourceError(f"model file {path} cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[module_name]
        raise ModelSourceError(
            f"importing model file {path} failed: {type(error).__name__}: {first_line(error)}. Run "
            f"`python {path}` to see the whole error"
        ) from error
    return module


def _import_module(where: str) -> Any:
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as error:
        raise ModelSourceError(
            f"cannot import model module '{where}' here ({first_line(error)}): install it, or add its folder to "
            "PYTHONPATH, on every machine of the job"
        ) from error
    except Exception as error:
        raise ModelSourceError(
            f"importing model module '{where}' failed: {type(error).__name__}: {first_line(error)}"
        ) from error


def _identifier(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text) or "model"


def build_custom(
    name: str,
    num_classes: int,
    kwargs: Optional[Dict[str, Any]] = None,
    img_size: Optional[int] = None,
    rates: Optional[Dict[str, float]] = None,
) -> nn.Module:
    """factory(num_classes=..., **kwargs), with `img_size` when the factory takes it and the user did not give it,
    and each non-zero rate (`drop_path`, `dropout`) under the name the factory gives it."""
    factory = load_factory(name)
    accepted = _parameters(factory)
    takes_classes = accepted is None or "num_classes" in accepted
    arguments = {**(kwargs or {}), **({"num_classes": num_classes} if takes_classes else {})}
    if img_size is not None and "img_size" not in arguments and accepted is not None and "img_size" in accepted:
        arguments["img_size"] = img_size
    for option, value in (rates or {}).items():
        if value:
            arguments[_rate_name(name, factory, option, accepted)] = value
    try:
        model = factory(**arguments)
    except TypeError as error:
        passed = [
            f"{option} as {arguments_name}"
            for option, value in (rates or {}).items()
            if value
            for arguments_name in RATE_NAMES[option]
            if arguments_name in arguments and arguments_name in str(error)
        ]
        if passed:
            raise ModelSourceError(
                f"--model {name} takes **kwargs and passes them on to something that does not take {passed[0]} "
                f"({first_line(error)}): give the model's own argument with --model-kwargs (e.g. dropout=0.1) instead "
                f"of --{passed[0].split(' ')[0].replace('_', '-')}"
            ) from error
        raise ModelSourceError(
            f"--model {name}: calling it with {_shown(arguments)} failed: {first_line(error)}. A factory takes "
            "num_classes and the --model-kwargs you give"
        ) from error
    except Exception as error:
        raise ModelSourceError(
            f"--model {name}: calling it with {_shown(arguments)} raised {type(error).__name__}: {first_line(error)}"
        ) from error
    if not isinstance(model, nn.Module):
        raise ModelSourceError(f"--model {name} returned a {type(model).__name__}, not a torch.nn.Module")
    if not takes_classes:
        _replace_last_linear(model, num_classes, name)
    return model


def _replace_last_linear(model: nn.Module, num_classes: int, name: str) -> None:
    """A factory without `num_classes` (`ResNet18()` of many repositories): its last Linear layer, when it has
    another number of outputs, becomes a fresh one with one output per class — what a user would write by hand."""
    layers = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    if layers and layers[-1].weight.shape[0] == num_classes:  # built for the classes already (--model-kwargs)
        return
    found = [(path, module) for path, module in model.named_modules() if isinstance(module, nn.Linear)]
    if not found:
        raise ModelSourceError(
            f"--model {name} takes no num_classes argument and has no Linear layer to give {num_classes} outputs: "
            "pass its own argument for the class count in --model-kwargs (e.g. class_num=N), or write a factory that "
            "builds it for num_classes"
        )
    path, last = found[-1]
    if last.out_features == num_classes:
        return
    parent = model.get_submodule(path.rpartition(".")[0]) if "." in path else model
    setattr(parent, path.rpartition(".")[2], nn.Linear(last.in_features, num_classes, bias=last.bias is not None))
    log.info(
        "%s takes no num_classes: its last Linear layer '%s' (%d -> %d) is replaced by one with %d outputs",
        name,
        path,
        last.in_features,
        last.out_features,
        num_classes,
    )


def _parameters(factory: Callable[..., Any]) -> Optional[Dict[str, inspect.Parameter]]:
    """The factory's named parameters; None when it takes **kwargs (anything goes) or has no readable signature."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return dict(params)


def _rate_name(name: str, factory: Any, option: str, accepted: Optional[Dict[str, Any]]) -> str:
    choices = RATE_NAMES[option]
    if accepted is None:
        return choices[0]
    for choice in choices:
        if choice in accepted:
            return choice
    flag = "--" + option.replace("_", "-")
    raise ModelSourceError(
        f"{flag}: --model {name} takes no {' or '.join(choices)} argument; add one to {_qualname(factory)} or drop "
        f"{flag}"
    )


def _qualname(factory: Any) -> str:
    return getattr(factory, "__qualname__", repr(factory))


def _shown(arguments: Dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in arguments.items())


def declared_preprocessing(name: str) -> Dict[str, Any]:
    """What the factory declares of its input, timm's way (`FACTORY.pretrained_cfg = {"input_size": (3, 224, 224),
    "mean": ..., "std": ..., "interpolation": "bicubic", "crop_pct": 0.9}`), as config options; {} when nothing."""
    declared = getattr(load_factory(name), "pretrained_cfg", None)
    if not isinstance(declared, dict):
        return {}
    found: Dict[str, Any] = {}
    size = declared.get("input_size")
    if isinstance(size, (list, tuple)) and size and isinstance(size[-1], int):
        found["img_size"] = int(size[-1])
    for key in ("mean", "std"):
        values = declared.get(key)
        if isinstance(values, (list, tuple)) and len(values) == 3:
            found[key] = tuple(float(v) for v in values)
    if declared.get("interpolation") in ("bilinear", "bicubic", "nearest"):
        found["interpolation"] = declared["interpolation"]
    if isinstance(declared.get("crop_pct"), (int, float)):
        found["crop_fraction"] = float(declared["crop_pct"])
    return found
