"""A rank of bench/contain-proof.sh: a DataLoader of 4 workers (spawned, so
that each can hold device memory of its own, and so that, unlike forked
ones, they inherit no file descriptor of the rank) in an endless epoch.
Each worker writes OUT/worker-RANK-ID once it holds its memory; the rank
writes OUT/ready-RANK after 20 steps. usage: contain_job.py OUT [--cpu]"""
import os
import sys

import torch
from torch.utils.data import DataLoader, Dataset

OUT = sys.argv[1]
CPU = "--cpu" in sys.argv
RANK = int(os.environ["RANK"])
LOCAL = int(os.environ["LOCAL_RANK"])
HOLD = 256 << 20  # bytes every process keeps on its device


def device():
    return torch.device("cpu") if CPU else torch.device("cuda", LOCAL)


class Endless(Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        return torch.full((1024,), float(i % 7))


held = []


def init_worker(wid):
    held.append(torch.ones(HOLD // 4, dtype=torch.float32, device=device()))
    if not CPU:
        torch.cuda.synchronize(device())
    open(os.path.join(OUT, "worker-%d-%d" % (RANK, wid)), "w").close()


def main():
    dev = device()
    if not CPU:
        torch.cuda.set_device(dev)
    held.append(torch.ones(HOLD // 4, dtype=torch.float32, device=dev))
    loader = DataLoader(Endless(), batch_size=64, num_workers=4, worker_init_fn=init_worker,
                        multiprocessing_context="spawn", persistent_workers=True)
    w = torch.randn(1024, 1024, device=dev)
    for step, batch in enumerate(loader):
        y = batch.to(dev) @ w
        if step == 20:
            float(y.sum())
            open(os.path.join(OUT, "ready-%d" % RANK), "w").close()


if __name__ == "__main__":
    main()
