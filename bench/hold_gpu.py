"""Hold 4 GiB on one GPU until killed (busy-avoidance probe)."""
import sys
import time

import torch

x = torch.empty(4 << 30, dtype=torch.uint8, device="cuda:%s" % sys.argv[1])
print("holding", flush=True)
time.sleep(600)
