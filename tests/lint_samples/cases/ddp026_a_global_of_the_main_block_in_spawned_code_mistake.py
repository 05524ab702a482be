"""ddptrain lint sample ddp026_a_global_of_the_main_block_in_spawned_code: the mistake (lines marked `# expect:` get exactly those findings)."""
import argparse
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def loss_of(out, y):
    return nn.functional.mse_loss(out, y) * args.loss_scale  # expect: DDP026


def run(rank, world_size):
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "0")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = DDP(nn.Linear(2, 2))
    loss_of(model(torch.randn(4, 2)), torch.randn(4, 2)).backward()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--loss-scale", type=float, default=1.0)
    args = parser.parse_args()  # the spawned processes never run this line
    mp.spawn(run, args=(2,), nprocs=2)
