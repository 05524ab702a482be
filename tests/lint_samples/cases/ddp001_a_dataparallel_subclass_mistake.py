"""ddptrain lint sample ddp001_a_dataparallel_subclass: the mistake (lines marked `# expect:` get exactly those findings)."""
import torch
import torch.distributed as dist
from torch import nn


class DataParallelWithCallback(nn.DataParallel):  # the synchronized-BatchNorm code many GAN repositories copy
    def replicate(self, module, device_ids):
        return super().replicate(module, device_ids)


def main():
    dist.init_process_group("gloo")
    net = nn.Linear(8, 2)
    net = DataParallelWithCallback(net, device_ids=[0, 1])  # expect: DDP001
    net(torch.zeros(4, 8)).sum().backward()


if __name__ == "__main__":
    main()
