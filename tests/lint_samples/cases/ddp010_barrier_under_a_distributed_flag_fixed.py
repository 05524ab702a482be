"""ddptrain lint sample ddp010_barrier_under_a_distributed_flag: the fixed; `ddptrain lint` finds nothing here."""
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main(args):
    distributed = args.local_rank >= 0  # the same on every rank: distributed or not
    if distributed:
        dist.init_process_group("nccl")
        torch.cuda.set_device(args.local_rank)
    model = build_model().cuda()
    if distributed:
        model = DDP(model, device_ids=[args.local_rank])
    is_main = args.local_rank <= 0
    if args.resume:
        load_checkpoint(model, args.resume)
        if distributed:
            dist.barrier()
    train(model)


if __name__ == "__main__":
    main(parse_args())
