"""ddptrain lint sample ddp006_cuda0_in_a_conditional_at_the_top: the mistake (lines marked `# expect:` get exactly those findings)."""
import argparse, os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")  # expect: DDP006


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(device)
    model = DDP(build_model().to(device), device_ids=[device])
    train(model)


if __name__ == "__main__":
    main()
