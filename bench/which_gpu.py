"""Concurrency probe: report which physical GPU this job got (its UUID as
torch sees it) and hold it for a few seconds so concurrent jobs overlap."""
import os
import sys
import time

import torch

p = torch.cuda.get_device_properties(0)
uuid = str(getattr(p, "uuid", "?"))
x = torch.ones(1 << 28, device="cuda")  # 1 GiB: the GPU is visibly in use
with open(sys.argv[1], "w") as f:
    f.write("%s %s %.3f\n" % (os.environ.get("CUDA_VISIBLE_DEVICES"), uuid, time.time()))
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 3)
