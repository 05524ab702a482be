"""--strategy fsdp: FSDP2 (`torch.distributed.fsdp.fully_shard`) over the model's blocks, the root last.

Each process then holds 1/N of every parameter, its gradient and its optimizer state; a block's parameters are
gathered for its forward and backward and freed after (`reshard_after_forward`). Under --amp bf16 the gathered
parameters are bfloat16 for compute while the gradients are reduced in float32: a bfloat16 sum of N ranks'
gradients keeps 8 bits of mantissa, and small updates would vanish in it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Optional

import torch
from torch import nn


def block_units(model: nn.Module) -> List[nn.Module]:
    """The model's repeated blocks, in order: the members that are modules of their own layers (holding parameters)
    of every nn.Sequential / nn.ModuleList within two levels of the root (a stem or head of single layers is not a
    stack of blocks) — a ViT's blocks (timm `blocks`, torchvision `encoder.layers`), a ResNet's
    residual blocks (`layer1..4`), a ConvNeXt's or EfficientNet's stages (`stages`, `features`). Empty for a model
    without such a stack (it is then sharded as one unit)."""
    units: List[nn.Module] = []

    def visit(module: nn.Module, depth: int) -> None:
        for child in module.children():
            members = [m for m in child.children() if _holds_parameters(m) and next(m.children(), None) is not None]
            if isinstance(child, (nn.Sequential, nn.ModuleList)) and members:
                units.extend(members)
            elif depth < 2:
                visit(child, depth + 1)

    visit(model, 0)
    return units


def _holds_parameters(module: nn.Module) -> bool:
    return next(module.parameters(), None) is not None


def shard_model(
    model: nn.Module,
    device: torch.device,
    compute_dtype: Optional[torch.dtype],
    reshard_after_forward: bool = True,
    offload: bool = False,
) -> int:
    """fully_shard each block, then the root (which takes the parameters left: stem, norms, head), over all the
    processes of the default group. Returns the number of blocks sharded apart from the root."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

    mesh = init_device_mesh(device.type, (torch.distributed.get_world_size(),))
    policy = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
    offloading = CPUOffloadPolicy() if offload else OffloadPolicy()
    units = block_units(model)
    for unit in units:
        fully_shard(
            unit, mesh=mesh, mp_policy=policy, offload_policy=offloading, reshard_after_forward=reshard_after_forward
        )
    # the root's parameters are used last in the forward: gathering them again for the backward gains nothing
    fully_shard(model, mesh=mesh, mp_policy=policy, offload_policy=offloading, reshard_after_forward=False)
    return len(units)


def is_sharded(model: nn.Module) -> bool:
    """A model whose parameters FSDP2 shards (possibly inside torch.compile's wrapper)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(getattr(model, "_orig_mod", model), FSDPModule)


@contextlib.contextmanager
def gradient_sync(model: nn.Module, sync: bool) -> Iterator[None]:
    """A micro-batch's backward that reduces gradients (`sync`: the optimizer step's last) or only accumulates them:
    DDP's no_sync(); FSDP keeps the gradients unsharded and the parameters gathered between micro-batches, so a
    step of --grad-accum K reduces once and gathers each block once for the backward, not K times."""
    if is_sharded(model):
        root: Any = getattr(model, "_orig_mod", model)
        root.set_requires_gradient_sync(sync)
        root.set_reshard_after_backward(sync)
        yield
    elif sync:
        yield
    else:
        with model.no_sync():  # type: ignore[operator]
            yield


def load_whole_into_shards(model: nn.Module, state: Dict[str, torch.Tensor]) -> None:
    """Whole tensors (a checkpoint file, --weights) into a sharded model: each process keeps its shards."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    set_model_state_dict(model, dict(state), options=StateDictOptions(full_state_dict=True))


def return_freed_memory() -> bool:
    """On CPU: glibc maps every allocation above 128 KiB on its own and unmaps it when freed (a fixed
    M_MMAP_THRESHOLD). Its default threshold grows with the blocks freed, after which they come from a heap that
    does not shrink: FSDP's gathered parameters and gradients, freed after each block, would then keep the resident
    set (and a `ulimit -d` / cgroup account) as large as an unsharded model's. False where mallopt is not glibc's."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        return bool(libc.mallopt(-3, 128 * 1024))  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        return False
