"""Models: build by name (`build`), read weights and fit them (`weights`), wrap for training (`wrap`, `syncbn`)
and unwrap."""

from ..config.sections import is_factory
from .build import TIMM_PREFIX, build_configured, build_model, freeze_backbone, head_name
from .custom import ModelSourceError, declared_preprocessing
from .preprocess import pretrained_preprocessing
from .pretrained import build_pretrained, fetch, locate
from .weights import describe_mismatch, load_weights, read_model_weights, strip_prefixes
from .wrap import compile_model, is_compiled, place_model, unwrap, wrap_ddp

__all__ = [
    "TIMM_PREFIX",
    "build_configured",
    "build_model",
    "ModelSourceError",
    "declared_preprocessing",
    "is_factory",
    "build_pretrained",
    "fetch",
    "locate",
    "freeze_backbone",
    "head_name",
    "pretrained_preprocessing",
    "describe_mismatch",
    "load_weights",
    "read_model_weights",
    "strip_prefixes",
    "compile_model",
    "is_compiled",
    "place_model",
    "unwrap",
    "wrap_ddp",
]
