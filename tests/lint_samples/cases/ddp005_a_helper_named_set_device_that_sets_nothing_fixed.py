"""ddptrain lint sample ddp005_a_helper_named_set_device_that_sets_nothing: the fixed; `ddptrain lint` finds nothing here."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def set_device(local_rank=None):
    """The device to put the model on, made the process's current device."""
    torch.cuda.set_device(local_rank)
    return torch.device(f"cuda:{local_rank}")


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("nccl")
    device = set_device(local_rank)
    model = DDP(torch.nn.Linear(2, 2).to(device), device_ids=[local_rank])


if __name__ == "__main__":
    main()
