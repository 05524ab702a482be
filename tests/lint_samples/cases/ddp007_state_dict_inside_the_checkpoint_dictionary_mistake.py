"""ddptrain lint sample ddp007_state_dict_inside_the_checkpoint_dictionary: the mistake (lines marked `# expect:` get exactly those findings)."""
import os

import torch
import torch.distributed as dist
from torch import nn


def train(model, optimizer, args):
    model = nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
    for epoch in range(args.epochs):
        train_one_epoch(model, optimizer)
        if dist.get_rank() == 0:
            save_dict = {
                "epoch": epoch + 1,
                "state_dict": model.state_dict(),  # expect: DDP007
                "optimizer": optimizer.state_dict(),
            }
            torch.save(save_dict, os.path.join(args.dump_path, "checkpoint.pth.tar"))


if __name__ == "__main__":
    dist.init_process_group("gloo")
    train(model, optimizer, args)
