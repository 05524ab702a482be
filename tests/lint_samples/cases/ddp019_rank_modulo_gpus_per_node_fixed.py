"""ddptrain lint sample ddp019_rank_modulo_gpus_per_node: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def main_worker(gpu, ngpus_per_node, args):
    args.rank = args.node_rank * ngpus_per_node + gpu
    dist.init_process_group("nccl", init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
    torch.cuda.set_device(gpu)
    model = DDP(build_model().cuda(gpu), device_ids=[gpu])
    for epoch in range(args.epochs):
        train_one_epoch(model, epoch)
        if args.rank == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
