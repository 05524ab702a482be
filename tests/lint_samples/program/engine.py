import torch
import torch.distributed as dist


def run_epoch(model, loader, sampler, optimizer, epoch):
    sampler.set_epoch(epoch)
    for (x,) in loader:
        model(x.cuda()).sum().backward()
        optimizer.step()
        optimizer.zero_grad()


def save_on_master(state, path):
    if dist.get_rank() == 0:
        torch.save(state, path)
