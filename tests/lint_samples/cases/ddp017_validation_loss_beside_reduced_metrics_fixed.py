"""ddptrain lint sample ddp017_validation_loss_beside_reduced_metrics: the fixed; `ddptrain lint` finds nothing here."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


class Meter:
    def __init__(self):
        self.total = self.count = 0.0

    def update(self, value, n=1):
        self.total += value * n
        self.count += n

    @property
    def avg(self):
        return self.total / max(self.count, 1)


def distributed_mean(tensor):
    parts = [torch.zeros_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor)
    return torch.stack(parts).mean(0)


def validate(model, loader, loss_fn):
    model.eval()
    val_loss_meter, val_acc_meter = Meter(), Meter()
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            val_loss_meter.update(loss_fn(out, y).item(), len(y))
            val_acc_meter.update((out.argmax(1) == y).float().mean().item(), len(y))
    val_loss, val_acc = distributed_mean(torch.tensor([val_loss_meter.avg, val_acc_meter.avg])).tolist()
    print(f"[Validation] loss {val_loss:.4f}")  # ...and so is the loss
    print(f"[Validation] accuracy {val_acc:.4f}")
    return val_acc


if __name__ == "__main__":
    dist.init_process_group("gloo")
    val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False, drop_last=True))
    validate(DDP(model), val_loader, torch.nn.functional.cross_entropy)
