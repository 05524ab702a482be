"""ddptrain lint sample ddp015_an_early_return_on_a_flag_set_to_a_rank_test: the fixed; `ddptrain lint` finds nothing here."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, config):
        self.distributed = config["distributed"]
        if self.distributed:
            self.local_master = config["local_rank"] == 0
        else:
            self.local_master = True
        self.model = DDP(model) if self.distributed else model

    def save_checkpoint(self, epoch):
        # only the local master saves
        if not self.local_master:
            return
        state = {"epoch": epoch, "state_dict": self.model.module.state_dict()}
        torch.save(state, "checkpoint.pth")


if __name__ == "__main__":
    dist.init_process_group("gloo")
    trainer = Trainer(torch.nn.Linear(2, 2), {"distributed": True, "local_rank": int(os.environ["LOCAL_RANK"]), "log": True})
    for epoch in range(3):
        trainer.save_checkpoint(epoch)
