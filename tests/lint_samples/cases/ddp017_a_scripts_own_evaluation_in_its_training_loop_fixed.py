"""ddptrain lint sample ddp017_a_scripts_own_evaluation_in_its_training_loop: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def print0(*args, **kwargs):
    if int(os.environ.get("RANK", 0)) == 0:
        print(*args, **kwargs)


if __name__ == "__main__":
    dist.init_process_group("gloo")
    ddp_rank, ddp_world_size = dist.get_rank(), dist.get_world_size()
    train_loader = TokenLoader("train.bin", 8, 1024, ddp_rank, ddp_world_size)
    val_loader = TokenLoader("val.bin", 8, 1024, ddp_rank, ddp_world_size)  # each rank its own part
    model = DDP(GPT())
    for step in range(steps):
        if step % 250 == 0:
            model.eval()
            val_loader.reset()
            with torch.no_grad():
                val_loss = 0.0
                for _ in range(20):
                    x, y = val_loader.next_batch()
                    val_loss += model(x, y).item()
                val_loss /= 20
            val_loss = torch.tensor(val_loss)
            dist.all_reduce(val_loss, op=dist.ReduceOp.AVG)
            print0(f"val loss {val_loss}")
        model.train()
        x, y = train_loader.next_batch()
        model(x, y).backward()