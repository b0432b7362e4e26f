"""Fail-fast probe: NCCL all-reduces in a loop; rank 1 raises in the middle
(exit status 1 from the Python traceback) while the others are inside a
collective that can never complete."""
import os
import time

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl")
x = torch.ones(64 << 20, device="cuda")
for i in range(1000000):
    if rank == 1 and i == 20:
        raise RuntimeError("rank 1 fails on purpose in iteration 20")
    dist.all_reduce(x)
    torch.cuda.synchronize()
