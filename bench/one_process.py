"""One process on every device amdrun made visible (issue 15).

Prints what it sees (CUDA_VISIBLE_DEVICES, torch.cuda.device_count(),
WORLD_SIZE), checks a tensor-parallel matmul split over the devices
against the one-device result, measures a device-to-device copy, then
sleeps HOLD seconds so that another job can be seen waiting for the
lease.

usage: python3 one_process.py [HOLD]
"""
import json
import os
import sys
import time

import torch


def main():
    hold = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    n = torch.cuda.device_count()
    print(json.dumps({"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "device_count": n,
                      "world_size": os.environ.get("WORLD_SIZE"), "start": time.time()}), flush=True)
    torch.manual_seed(0)
    a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.float32)
    b = torch.randn(8192, 8192, device="cuda:0", dtype=torch.float32)
    # Tensor parallel: device i multiplies a by its slice of b's columns.
    outs = []
    for i, part in enumerate(b.chunk(n, dim=1)):
        outs.append(a.to(f"cuda:{i}") @ part.to(f"cuda:{i}"))
    c = torch.cat([o.to("cuda:0") for o in outs], dim=1)
    ref = a @ b
    err = ((c - ref).abs().max() / ref.abs().max()).item()
    res = {"tp_devices": n, "tp_rel_err": err}
    if n > 1:
        x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")
        y = torch.empty_like(x, device="cuda:1")
        y.copy_(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(10):
                y.copy_(x)
            torch.cuda.synchronize(1)
            times.append(10 * x.numel() / (time.perf_counter() - t) / 1e9)
        times.sort()
        res["copy_0_to_1_GBps_median_of_5"] = round(times[2], 1)
    print(json.dumps(res), flush=True)
    time.sleep(hold)
    print(json.dumps({"end": time.time()}), flush=True)


if __name__ == "__main__":
    main()
