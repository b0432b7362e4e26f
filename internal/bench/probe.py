# amdrun bench's probe, carried inside the amdrun binary and run with the
# user's python3 and PyTorch. It prints one JSON object per line:
#   {"kind": "plan", "pairs": P, "devices": D}
#   {"kind": "d2d", "a": i, "b": j, "mbps": x}   copy cuda:i -> cuda:j
#   {"kind": "h2d", "dev": j, "mbps": x}         pinned host -> cuda:j
# Device numbers are positions in CUDA_VISIBLE_DEVICES as amdrun set it.
# usage: python3 -c PROBE d2d|h2d SIZE_MIB ITERS
import json
import sys
import time

import torch


def emit(**kw):
    print(json.dumps(kw), flush=True)


def timed_copy(dst, src, iters, devs):
    for _ in range(3):
        dst.copy_(src, non_blocking=True)
    for d in devs:
        torch.cuda.synchronize(d)
    t0 = time.perf_counter()
    for _ in range(iters):
        dst.copy_(src, non_blocking=True)
    for d in devs:
        torch.cuda.synchronize(d)
    return time.perf_counter() - t0


def main():
    mode, size_mib, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if not torch.cuda.is_available():
        print("amdrun bench: torch sees no GPU (torch %s)" % torch.__version__, file=sys.stderr)
        sys.exit(3)
    n = torch.cuda.device_count()
    nbytes = size_mib << 20
    if mode == "d2d":
        emit(kind="plan", pairs=n * (n - 1), devices=n)
        for a in range(n):
            src = torch.empty(nbytes, dtype=torch.uint8, device="cuda:%d" % a)
            for b in range(n):
                if a == b:
                    continue
                dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda:%d" % b)
                dt = timed_copy(dst, src, iters, (a, b))
                emit(kind="d2d", a=a, b=b, mbps=nbytes * iters / dt / 1e6)
                del dst
            del src
    elif mode == "h2d":
        emit(kind="plan", pairs=n, devices=n)
        host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
        for b in range(n):
            dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda:%d" % b)
            dt = timed_copy(dst, host, iters, (b,))
            emit(kind="h2d", dev=b, mbps=nbytes * iters / dt / 1e6)
            del dst
    else:
        sys.exit("amdrun bench: unknown probe mode %r" % mode)


main()
