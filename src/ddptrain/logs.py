"""Console logging that knows its rank: rank 0 speaks at INFO, the others only warn, prefixed with their rank,
so a problem on rank 3 is never lost and never drowned. The standard library only (no torch)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

LOGGER = "ddptrain"
# `log.warning(..., extra=RANK_0_SAYS)`: a warning every rank would give alike (about data they all list the same
# way), given once, by rank 0, and dropped on the others.
RANK_0_SAYS = {"rank_0_says": True}


def setup_logging(rank: int, world_size: int) -> logging.Logger:
    logger = logging.getLogger(LOGGER)
    logger.handlers.clear()
    logger.propagate = False
    handler = logging.StreamHandler(sys.stderr)
    prefix = f"[rank {rank}] " if world_size > 1 else ""
    handler.setFormatter(logging.Formatter(f"{prefix}%(levelname)s %(message)s" if rank else "%(message)s"))
    if rank:
        handler.addFilter(lambda record: not getattr(record, "rank_0_says", False))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if rank == 0 else logging.WARNING)
    return logger


def add_log_file(path: Path) -> logging.Handler:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logging.getLogger(LOGGER).addHandler(handler)
    return handler
