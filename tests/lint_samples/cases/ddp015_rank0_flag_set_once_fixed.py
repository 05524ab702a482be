"""ddptrain lint sample ddp015_rank0_flag_set_once: the fixed; `ddptrain lint` finds nothing here."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, local_rank):
        self.model = DDP(model.cuda(local_rank), device_ids=[local_rank])
        self.save_to_disk = dist.get_rank() == 0  # one writer

    def fit(self, epochs):
        for epoch in range(epochs):
            train_one_epoch(self.model, epoch)
            save_cp = epoch % 5 == 0
            if save_cp and self.save_to_disk:
                torch.save(self.model.module.state_dict(), "checkpoint.pt")


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    Trainer(build_model(), local_rank).fit(100)


if __name__ == "__main__":
    main()
