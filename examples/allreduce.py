"""All-reduce bandwidth benchmark, reported like nccl-tests.

Run it under amdrun or torchrun:
    amdrun --ngpus 2 examples/allreduce.py
    torchrun --standalone --nproc-per-node 2 examples/allreduce.py

For each size from --min-bytes to --max-bytes (doubling) it times
--iters all-reduces of a float32 tensor after --warmup ones and prints the
algorithm bandwidth (bytes / time) and the bus bandwidth (algbw * 2(n-1)/n,
the figure nccl-tests reports). Uses NCCL on GPUs, gloo on CPUs. With
--json FILE rank 0 also writes the results as JSON.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--min-bytes", type=int, default=1 << 20)
    p.add_argument("--max-bytes", type=int, default=1 << 30)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--json", default="")
    args = p.parse_args()

    t_user = time.time()
    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
        try:
            dist.init_process_group("nccl", device_id=dev)  # PyTorch >= 2.3: eager NCCL init
        except TypeError:
            dist.init_process_group("nccl")
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    rows = []
    size = args.min_bytes
    if rank == 0:
        print("%12s %12s %10s %12s %12s" % ("size(B)", "count", "time(us)", "algbw(GB/s)", "busbw(GB/s)"), flush=True)
    while size <= args.max_bytes:
        n = size // 4
        x = torch.ones(n, dtype=torch.float32, device=dev)
        for _ in range(args.warmup):
            dist.all_reduce(x)
        sync()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(x)
        sync()
        dt = (time.perf_counter() - t0) / args.iters
        algbw = size / dt / 1e9
        busbw = algbw * 2 * (world - 1) / world
        rows.append({"bytes": size, "time_us": dt * 1e6, "algbw_gbs": algbw, "busbw_gbs": busbw})
        if rank == 0:
            print("%12d %12d %10.1f %12.2f %12.2f" % (size, n, dt * 1e6, algbw, busbw), flush=True)
        size *= 2
        del x
    if rank == 0:
        peak = max(r["busbw_gbs"] for r in rows)
        print("# world %d, backend %s, peak busbw %.2f GB/s" % (world, dist.get_backend(), peak), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"world_size": world, "backend": dist.get_backend(), "rows": rows, "peak_busbw_gbs": peak, "t_user": t_user}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
