"""Restart probe: attempt 0 (TORCHELASTIC_RESTART_COUNT=0), rank 0 writes
the wall clock (ns) to DIR/fail and exits 1; on the next attempt every
rank writes the wall clock to DIR/a1.r<RANK> as its first act and exits
0. The earliest a1 time minus the fail time is the restart time."""
import os
import sys
import time

t = time.time_ns()
d = sys.argv[1]
rank = os.environ.get("RANK", "0")
if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
    if rank == "0":
        with open(os.path.join(d, "fail"), "w") as f:
            f.write(str(time.time_ns()))
        sys.exit(1)
    time.sleep(600)  # stopped by the launcher when rank 0 fails
with open(os.path.join(d, "a1.r" + rank), "w") as f:
    f.write(str(t))
