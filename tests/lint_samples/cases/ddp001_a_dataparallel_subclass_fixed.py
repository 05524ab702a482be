"""ddptrain lint sample ddp001_a_dataparallel_subclass: the fixed; `ddptrain lint` finds nothing here."""
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class DataParallelWithCallback(nn.DataParallel):
    def replicate(self, module, device_ids):
        return super().replicate(module, device_ids)


def convert_model(module):
    if isinstance(module, nn.DataParallel):  # only what the caller already made DataParallel is wrapped again
        return DataParallelWithCallback(module.module, device_ids=module.device_ids)
    return module


def wrap(net, distributed):
    if distributed:
        return DDP(net)
    return DataParallelWithCallback(net)  # after the distributed run's return: the single-process path


def main():
    dist.init_process_group("gloo")
    net = convert_model(wrap(nn.Linear(8, 2), dist.is_initialized()))
    net(torch.zeros(4, 8)).sum().backward()


if __name__ == "__main__":
    main()
