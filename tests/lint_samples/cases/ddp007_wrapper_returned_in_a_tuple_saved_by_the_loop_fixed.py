"""ddptrain lint sample ddp007_wrapper_returned_in_a_tuple_saved_by_the_loop: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def distributed_opt(args, model, optimizer):
    if args.platform == "local":
        model = DDP(model, device_ids=[args.local_rank])
    return model, optimizer


def train_validate(model, optimizer, loader, args):
    for x, y in loader:
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
    if args.rank == 0:
        torch.save({"model_state_dict": model.module.state_dict()}, "model.pt")


def main(args):
    dist.init_process_group("gloo")
    net, optimizer = distributed_opt(args, build_model(), make_optimizer())
    train_validate(net, optimizer, make_loader(), args)
