"""Models: build by name (`build`), fit weights into them (`weights`), wrap for training and unwrap (`wrap`)."""

from .build import TIMM_PREFIX, build_model, freeze_backbone, head_name
from .preprocess import pretrained_preprocessing
from .pretrained import build_pretrained, fetch, locate
from .weights import describe_mismatch, load_weights, strip_prefixes
from .wrap import compile_model, is_compiled, place_model, unwrap, wrap_ddp

__all__ = [
    "TIMM_PREFIX",
    "build_model",
    "build_pretrained",
    "fetch",
    "locate",
    "freeze_backbone",
    "head_name",
    "pretrained_preprocessing",
    "describe_mismatch",
    "load_weights",
    "strip_prefixes",
    "compile_model",
    "is_compiled",
    "place_model",
    "unwrap",
    "wrap_ddp",
]
