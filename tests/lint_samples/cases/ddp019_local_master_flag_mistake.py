"""ddptrain lint sample ddp019_local_master_flag: the mistake (lines marked `# expect:` get exactly those findings)."""
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main(args):
    dist.init_process_group("nccl")
    args.rank = int(os.environ["RANK"])
    args.local_rank = int(os.environ["LOCAL_RANK"])
    args.is_master = args.rank == 0
    args.is_local_master = args.local_rank == 0
    torch.cuda.set_device(args.local_rank)
    model = DDP(build_model().cuda(), device_ids=[args.local_rank])
    for epoch in range(args.epochs):
        train_one_epoch(model, epoch)
        if args.is_local_master:
            torch.save(model.module.state_dict(), "checkpoint.pth")  # expect: DDP019


if __name__ == "__main__":
    main(parse_args())
