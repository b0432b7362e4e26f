"""A real torch.distributed job for amdrun's end-to-end tests.

Each rank joins the gloo process group through the env:// defaults that
amdrun sets (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), all-reduces
rank+1, and writes what it saw to OUTDIR/rank<RANK>.json (creating
OUTDIR): the sum, its LOCAL_RANK, host name, master address and port, the
visible-device variables and the CPU/memory affinity the kernel reports
in /proc/self/status.

usage: python3 allreduce_check.py OUTDIR
"""
import json
import os
import socket
import sys

import torch
import torch.distributed as dist


def status_field(name):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    return ""


def main():
    out = sys.argv[1]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    res = {
        "rank": rank,
        "world_size": world,
        "sum": t.item(),
        "expected_sum": world * (world + 1) / 2,
        "local_rank": int(os.environ["LOCAL_RANK"]),
        "env_rank": int(os.environ["RANK"]),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "hip_visible_devices": os.environ.get("HIP_VISIBLE_DEVICES"),
        "rocr_visible_devices": os.environ.get("ROCR_VISIBLE_DEVICES"),
        "hostname": socket.gethostname(),
        "master_addr": os.environ.get("MASTER_ADDR"),
        "master_port": os.environ.get("MASTER_PORT"),
        "slurm_cpu_bind_list": os.environ.get("SLURM_CPU_BIND_LIST"),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "local_world_size": os.environ.get("LOCAL_WORLD_SIZE"),
        "role_name": os.environ.get("ROLE_NAME"),
        "run_id": os.environ.get("TORCHELASTIC_RUN_ID"),
        "master_port": os.environ.get("MASTER_PORT"),
        "torch_nccl_async_error_handling": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING"),
        "nccl_async_error_handling": os.environ.get("NCCL_ASYNC_ERROR_HANDLING"),
        "cpus_allowed_list": status_field("Cpus_allowed_list"),
        "mems_allowed_list": status_field("Mems_allowed_list"),
        "argv": sys.argv[1:],
        "pid": os.getpid(),
    }
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
