"""ddptrain lint sample ddp028_a_group_call_in_the_spawning_process: the mistake (lines marked `# expect:` get exactly those findings)."""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def run(rank, world_size):
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "0")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = DDP(nn.Linear(2, 2))
    model(torch.randn(4, 2)).sum().backward()


if __name__ == "__main__":
    mp.spawn(run, args=(2,), nprocs=2)
    dist.destroy_process_group()  # expect: DDP028
