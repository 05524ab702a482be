"""ddptrain lint sample ddp019_rank0_of_every_node_saves: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def main():
    local_rank = int(os.environ["LOCAL_RANK"])  # torchrun --nnodes 2 --nproc-per-node 8 ...
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    model = DDP(build_model().cuda(), device_ids=[local_rank])
    for epoch in range(10):
        train_one_epoch(model, epoch)
        if local_rank == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")  # expect: DDP019
