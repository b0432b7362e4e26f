"""Launch-time probe: the first thing this rank does is write the wall
clock (ns) to DIR/r<RANK>. The launcher's start time minus the latest of
these is the time until every rank runs user code."""
import os
import sys
import time

t = time.time_ns()
with open(os.path.join(sys.argv[1], "r" + os.environ.get("RANK", "0")), "w") as f:
    f.write(str(t))
