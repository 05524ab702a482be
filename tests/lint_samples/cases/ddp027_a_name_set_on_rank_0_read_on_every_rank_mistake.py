"""ddptrain lint sample ddp027_a_name_set_on_rank_0_read_on_every_rank: the mistake (lines marked `# expect:` get exactly those findings)."""
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def train(model, batches, val_batches, rank):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for x, y in batches:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        if rank == 0:
            with torch.no_grad():
                val_loss = sum(nn.functional.mse_loss(model.module(x), y).item() for x, y in val_batches)
    print("last validation loss", val_loss)  # expect: DDP027


dist.init_process_group("gloo")
train(DDP(nn.Linear(2, 2)), [], [], dist.get_rank())
