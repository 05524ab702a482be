"""Pretrained weights through the libraries' own caches: torchvision's weights enums (files under
$TORCH_HOME/hub/checkpoints) and timm's pretrained configs (the Hugging Face cache, or $TORCH_HOME for timm weights
published by URL). A file already cached loads without network, so a cluster can fill the cache once; a missing one is
downloaded only because the user asked (`--pretrained`, `ddptrain fetch-weights`), by one process at a time per cache
(a file lock: the other processes of a node wait, then find it cached); no network is an error naming the file and
where to put it."""

from __future__ import annotations

import fcntl
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Tuple
from urllib.parse import urlparse

from torch import nn

from ..config.sections import ModelConfig
from ..errors import WeightsError
from ..util import first_line
from .build import TIMM_PREFIX, TIMM_RATES, build_configured, head_name, rated, rates_of, timm_size_args
from .weights import load_weights

log = logging.getLogger("ddptrain")

LOCK = ".ddptrain-fetch.lock"
DOWNLOAD_TIMEOUT_S = 30  # per network operation: an unreachable host is an error, never a hang
HF_FILES = ("model.safetensors", "pytorch_model.bin")  # what timm looks for in a Hugging Face repository


@dataclass(frozen=True)
class WeightsFile:
    """Where a model's pretrained weights live: a URL cached as one file under torch hub's folder, or a file of a
    Hugging Face repository in the Hugging Face cache."""

    model: str  # as given to --model
    tag: str  # what the library calls these weights
    url: Optional[str] = None
    repo: Optional[str] = None
    revision: Optional[str] = None
    filenames: Tuple[str, ...] = HF_FILES

    @property
    def cache(self) -> Path:
        if self.url:
            import torch.hub

            return Path(torch.hub.get_dir()) / "checkpoints"
        from huggingface_hub import constants

        return Path(constants.HF_HUB_CACHE)

    @property
    def where(self) -> str:
        """The cache entry to copy from a machine that has it."""
        if self.url:
            return str(self.cache / url_file_name(self.url))
        return str(self.cache / f"models--{(self.repo or '').replace('/', '--')}")

    def cached(self) -> Optional[Path]:
        if self.url:
            path = self.cache / url_file_name(self.url)
            return path if path.is_file() else None
        from huggingface_hub import try_to_load_from_cache

        for name in self.filenames:
            found = try_to_load_from_cache(self.repo or "", name, revision=self.revision)
            if isinstance(found, str):
                return Path(found)
        return None

    def download(self) -> Path:
        if self.url:
            return _download_url(self.url, self.cache / url_file_name(self.url))
        from huggingface_hub import constants, hf_hub_download
        from huggingface_hub.utils import EntryNotFoundError, LocalEntryNotFoundError

        _resolvable(constants.ENDPOINT)
        hub_log = logging.getLogger("huggingface_hub")
        level = hub_log.level
        hub_log.setLevel(logging.ERROR)  # its retry lines; the one useful line is ddptrain's error
        try:
            for name in self.filenames:
                try:
                    return Path(hf_hub_download(self.repo or "", name, revision=self.revision))
                except EntryNotFoundError as error:
                    if isinstance(error, LocalEntryNotFoundError):  # the Hub could not be reached at all
                        raise
                    continue  # the repository has no such file: try the next name
        finally:
            hub_log.setLevel(level)
        raise OSError(f"{self.repo} has none of {', '.join(self.filenames)}")


PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _resolvable(url: str) -> None:
    """Fail at once, not after a minute of retries, when the host's name does not resolve and no proxy would
    resolve it instead: a machine without network."""
    host = urlparse(url).hostname
    if not host or any(os.environ.get(name) for name in PROXY_VARIABLES):
        return
    try:
        socket.getaddrinfo(host, 443)
    except socket.gaierror as error:
        raise OSError(f"{host} does not resolve ({error.strerror}): no network here?") from None


def url_file_name(url: str) -> str:
    return os.path.basename(urlparse(url).path)


def locate(name: str, asked_by: str = "--pretrained") -> WeightsFile:
    """The pretrained weights of model `name` (torchvision's DEFAULT weights; timm's default pretrained tag).
    `asked_by` starts the error's message (empty: the command says it)."""
    said = f"{asked_by}: " if asked_by else ""
    if name.startswith(TIMM_PREFIX):
        import timm

        model = name[len(TIMM_PREFIX) :]
        if not timm.is_model(model.split(".")[0]):
            raise WeightsError(f"{said}timm has no model named {model!r}{_close(model, timm.list_models())}")
        cfg = timm.get_pretrained_cfg(model)
        if cfg is not None and cfg.hf_hub_id:
            repo, _, revision = cfg.hf_hub_id.partition("@")
            names = (cfg.hf_hub_filename,) if cfg.hf_hub_filename else HF_FILES
            return WeightsFile(name, cfg.hf_hub_id, repo=repo, revision=revision or None, filenames=names)
        if cfg is not None and isinstance(cfg.url, str) and cfg.url:
            return WeightsFile(name, cfg.url, url=cfg.url)
        raise WeightsError(f"{said}timm publishes no pretrained weights for {name}", every_rank=True)
    import torchvision

    known = torchvision.models.list_models()
    if name not in known:
        raise WeightsError(
            f"{said}torchvision has no model named {name!r}{_close(name, known)} (timm's are named timm:NAME)",
            every_rank=True,
        )
    try:
        weights = torchvision.models.get_model_weights(name).DEFAULT
    except (ValueError, KeyError, AttributeError):
        raise WeightsError(f"{said}torchvision publishes no pretrained weights for {name}", every_rank=True) from None
    return WeightsFile(name, str(weights), url=weights.url)


def _close(name: str, known) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(known), n=3)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def fetch(name: str) -> Tuple[Path, bool]:
    """The cached weights file of model `name`, downloaded first when missing; (path, whether it was downloaded)."""
    return fetch_file(locate(name, asked_by=""))


def fetch_file(wanted: WeightsFile) -> Tuple[Path, bool]:
    found = wanted.cached()
    if found is not None:  # a cache filled beforehand may be read-only: no lock needed to read it
        return found, False
    with _cache_lock(wanted.cache):
        found = wanted.cached()  # another process of this node may have fetched it meanwhile
        if found is not None:
            return found, False
        log.info("downloading the pretrained weights of %s (%s) into %s", wanted.model, wanted.tag, wanted.cache)
        try:
            return wanted.download(), True
        except Exception as error:  # network, proxy, DNS, HTTP, disk: all end the same way here
            raise WeightsError(_unreachable(wanted, error), every_rank=True) from None


def _unreachable(wanted: WeightsFile, error: Exception) -> str:
    reason = first_line(error, 200)
    variable = "TORCH_HOME" if wanted.url else "HF_HOME or HF_HUB_CACHE"
    return (
        f"the pretrained weights of {wanted.model} ({wanted.tag}) are not in the cache and could not be "
        f"downloaded ({reason}). Where there is network run `ddptrain fetch-weights {wanted.model}`, then copy "
        f"{wanted.where} to the same place here (or set {variable} to a cache that has it); or start from a local "
        "file with --weights PATH"
    )


class _cache_lock:
    """An exclusive flock on CACHE/.ddptrain-fetch.lock while one process downloads."""

    def __init__(self, cache: Path):
        self.path = cache / LOCK

    def __enter__(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.handle = open(self.path, "a")  # noqa: SIM115 - held until __exit__
        except OSError as error:
            raise WeightsError(
                f"--pretrained: cannot write to the weights cache {self.path.parent} ({error.strerror}); fill it "
                "where it is writable with `ddptrain fetch-weights MODEL`, or point TORCH_HOME / HF_HOME elsewhere",
                every_rank=True,
            ) from None
        fcntl.flock(self.handle, fcntl.LOCK_EX)

    def __exit__(self, *exc) -> None:
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def _download_url(url: str, path: Path) -> Path:
    import torch.hub

    match = torch.hub.HASH_REGEX.search(path.name)
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.hub.download_url_to_file(url, str(path), match.group(1) if match else None, progress=True)
    finally:
        socket.setdefaulttimeout(previous)
    return path


def build_pretrained(
    model_cfg: ModelConfig,
    num_classes: int,
    report: Callable[[str], None] = log.info,
    img_size: Optional[int] = None,
) -> nn.Module:
    """The model `model_cfg` names with its pretrained weights (a head of another class count re-initialised), for
    input size `img_size` (see build.timm_size_args), with its --model-kwargs, --drop-path and --dropout."""
    name = model_cfg.name
    path, _ = fetch(name)
    if name.startswith(TIMM_PREFIX):
        import timm

        # timm's own loading, from the cached file: its filters (position embeddings, classifier) apply
        model = timm.create_model(
            name[len(TIMM_PREFIX) :],
            pretrained=True,
            num_classes=num_classes,
            pretrained_cfg_overlay={"file": str(path)},
            **timm_size_args(name[len(TIMM_PREFIX) :], img_size),
            **{**rated(TIMM_RATES, rates_of(model_cfg)), **(model_cfg.kwargs or {})},
        )
    else:
        import torch

        model = build_configured(model_cfg, num_classes, img_size)
        load_weights(
            model,
            torch.load(path, map_location="cpu", weights_only=True),
            head_name(model, num_classes, model_cfg.head),
            str(path),
        )
    report(f"pretrained weights of {name}: {path}")
    return model
