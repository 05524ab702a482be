"""ddptrain lint sample ddp007_plain_model_saved_on_the_single_process_path: the fixed; `ddptrain lint` finds nothing here."""
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main(args):
    args.distributed = "WORLD_SIZE" in os.environ
    model = build_model()
    if args.distributed:
        dist.init_process_group("nccl")
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        model = DistributedDataParallel(model.cuda(), device_ids=[local_rank])
    train(model, args)
    if args.distributed:
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "model.pt")
    else:
        torch.save(model.state_dict(), "model.pt")  # the plain model: right as it is


if __name__ == "__main__":
    main(parse_args())
