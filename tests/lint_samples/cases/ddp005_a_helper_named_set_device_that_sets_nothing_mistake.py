"""ddptrain lint sample ddp005_a_helper_named_set_device_that_sets_nothing: the mistake (lines marked `# expect:` get exactly those findings)."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def set_device(local_rank=None):
    """The device to put the model on (torch's current device is left as it is)."""
    return torch.device(f"cuda:{local_rank}") if local_rank is not None else torch.device("cuda")


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("nccl")  # expect: DDP005
    device = set_device(local_rank)
    model = DDP(torch.nn.Linear(2, 2).to(device), device_ids=[local_rank])


if __name__ == "__main__":
    main()
