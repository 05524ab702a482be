"""Batch normalisation over the global batch of all processes, on any device.

torch's `nn.SyncBatchNorm` runs on GPUs only (DDP refuses it on CPU), so on CPU `--sync-bn` uses
`GlobalBatchNorm`: each process sums x, x² and its sample count per channel, one autograd-aware
all-reduce makes the global mean and variance, and the backward pass all-reduces the gradients of
those sums. The result equals BatchNorm on the concatenated batch in one process.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.nn.functional import all_reduce as differentiable_all_reduce


class GlobalBatchNorm(nn.modules.batchnorm._BatchNorm):
    """BatchNorm{1,2,3}d whose training statistics come from every rank's batch."""

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D)")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(x)
        if not (self.training and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
            return super().forward(x)
        channels = x.shape[1]
        dims = [0] + list(range(2, x.dim()))
        count = torch.full((1,), x.numel() / channels, dtype=torch.float64, device=x.device)
        # float64 sums: E[x^2] - E[x]^2 stays accurate for any batch size.
        local = torch.cat([x.double().sum(dims), (x.double() ** 2).sum(dims), count])
        total = differentiable_all_reduce(local)
        n = total[-1]
        mean = total[:channels] / n
        var = total[channels : 2 * channels] / n - mean**2
        self._update_running_stats(mean.detach(), var.detach(), n.item())
        shape = [1, channels] + [1] * (x.dim() - 2)
        y = (x - mean.view(shape).to(x.dtype)) * torch.rsqrt(var.view(shape).to(x.dtype) + self.eps)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y

    @torch.no_grad()
    def _update_running_stats(self, mean: torch.Tensor, var: torch.Tensor, n: float) -> None:
        running_mean, running_var, tracked = self.running_mean, self.running_var, self.num_batches_tracked
        if not self.track_running_stats or running_mean is None or running_var is None or tracked is None:
            return
        tracked.add_(1)
        momentum = self.momentum if self.momentum is not None else 1.0 / float(tracked)
        unbiased = var * (n / max(n - 1.0, 1.0))
        running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
        running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)


def convert_to_global_bn(module: nn.Module) -> nn.Module:
    """Replace every BatchNorm layer by a GlobalBatchNorm sharing its parameters and buffers."""
    if isinstance(module, nn.modules.batchnorm._BatchNorm) and not isinstance(module, GlobalBatchNorm):
        converted = GlobalBatchNorm(
            module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats
        )
        if module.affine:
            converted.weight, converted.bias = module.weight, module.bias
        if module.track_running_stats:
            converted.running_mean, converted.running_var = module.running_mean, module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
        converted.train(module.training)
        return converted
    for name, child in module.named_children():
        module.add_module(name, convert_to_global_bn(child))
    return module


def convert_sync_bn(model: nn.Module, device: torch.device) -> nn.Module:
    """torch's SyncBatchNorm on CUDA (its fused kernels), GlobalBatchNorm elsewhere."""
    if device.type == "cuda":
        return nn.SyncBatchNorm.convert_sync_batchnorm(model)
    return convert_to_global_bn(model)
