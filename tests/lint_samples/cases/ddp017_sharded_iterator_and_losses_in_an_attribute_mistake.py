"""ddptrain lint sample ddp017_sharded_iterator_and_losses_in_an_attribute: the mistake (lines marked `# expect:` get exactly those findings)."""
import logging
from collections import defaultdict

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.parallel import gather as gpu_gather


class ShardedIterator:
    """Every rank reads every num_shards-th example, starting at shard_id."""

    def __init__(self, data, shard_id, num_shards, shuffle):
        self.data, self.shard_id, self.num_shards, self.shuffle = data, shard_id, num_shards, shuffle

    def __iter__(self):
        return iter(self.data[self.shard_id :: self.num_shards])


class Reader:
    def __init__(self, model, dev_data):
        dist.init_process_group("gloo")
        self.model = DDP(model)
        self.dev = ShardedIterator(dev_data, shard_id=dist.get_rank(), num_shards=dist.get_world_size(), shuffle=False)
        self.total_eval_loss = defaultdict(float)

    def eval_epoch(self):
        self.model.eval()
        steps = 0
        for batch in self.dev:
            with torch.no_grad():
                outputs = gpu_gather(self.model(batch), 0)  # between this process's GPUs: no other rank
                self.total_eval_loss["eval/loss"] += outputs.mean().item()
            steps += 1
        for key in self.total_eval_loss:
            self.total_eval_loss[key] /= steps
            logging.info(f"{key} = {self.total_eval_loss[key]:.4f}")  # expect: DDP017

    def validate(self, answers):
        self.model.eval()
        hits = []
        for batch, answer in zip(self.dev, answers):
            with torch.no_grad():
                hits.append(float(self.model(batch).argmax() == answer))
        em = sum(hits) / len(hits)
        logging.info("EM %.2f" % (em * 100))  # expect: DDP017
        return em


if __name__ == "__main__":
    reader = Reader(model, dev_data)
    reader.eval_epoch()
    reader.validate(answers)
