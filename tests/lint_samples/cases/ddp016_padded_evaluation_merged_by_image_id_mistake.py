"""ddptrain lint sample ddp016_padded_evaluation_merged_by_image_id: the mistake (lines marked `# expect:` get exactly those findings)."""
import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


def merge(img_ids, scores):
    every_ids, every_scores = [None] * dist.get_world_size(), [None] * dist.get_world_size()
    dist.all_gather_object(every_ids, img_ids)
    dist.all_gather_object(every_scores, scores)
    merged_ids = np.concatenate(every_ids)
    merged_scores = np.concatenate(every_scores)
    return merged_ids, merged_scores


@torch.no_grad()
def evaluate(model, dataset):
    sampler = DistributedSampler(dataset, shuffle=False)  # expect: DDP016
    img_ids, scores = [], []
    for ids, images in DataLoader(dataset, batch_size=8, sampler=sampler):
        img_ids.append(ids.numpy())
        scores.append(model(images).numpy())
    ids, scores = merge(np.concatenate(img_ids), np.concatenate(scores))
    return scores.mean()


if __name__ == "__main__":
    dist.init_process_group("gloo")
    print(evaluate(torch.nn.Identity(), torch.utils.data.TensorDataset(torch.arange(10), torch.randn(10))))
