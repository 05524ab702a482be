"""ddptrain lint sample ddp015_a_save_in_the_worker_mp_spawn_starts: the mistake (lines marked `# expect:` get exactly those findings)."""
import os
from datetime import datetime

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def train(rank, world_size, stamp):
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world_size)
    model = DDP(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        optimizer.zero_grad()
        model(torch.randn(8, 4)).sum().backward()
        optimizer.step()
    torch.save(model.module.state_dict(), f"weights_{stamp}.pth")  # expect: DDP015
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "localhost")
    mp.spawn(train, args=(2, datetime.now().strftime("%m-%d-%H-%M")), nprocs=2)
