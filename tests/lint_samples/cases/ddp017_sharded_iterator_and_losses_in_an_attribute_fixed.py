"""ddptrain lint sample ddp017_sharded_iterator_and_losses_in_an_attribute: the fixed; `ddptrain lint` finds nothing here."""
import logging
from collections import defaultdict

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


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
        sums = torch.zeros(2)
        for batch in self.dev:
            with torch.no_grad():
                sums += torch.tensor([self.model(batch).mean().item(), 1.0])
        dist.all_reduce(sums)  # every rank's loss sum and step count
        self.total_eval_loss["eval/loss"] = (sums[0] / sums[1]).item()
        for key in self.total_eval_loss:
            logging.info(f"{key} = {self.total_eval_loss[key]:.4f}")

    def validate(self, answers):
        self.model.eval()
        hits = torch.zeros(2)
        for batch, answer in zip(self.dev, answers):
            with torch.no_grad():
                hits += torch.tensor([float(self.model(batch).argmax() == answer), 1.0])
        dist.all_reduce(hits)
        em = (hits[0] / hits[1]).item()
        logging.info("EM %.2f" % (em * 100))
        return em


if __name__ == "__main__":
    reader = Reader(model, dev_data)
    reader.eval_epoch()
    reader.validate(answers)
