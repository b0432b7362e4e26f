"""The one rank of a job of bench/queue-scale.py: it holds its devices for
HOLD seconds and then writes, to LOGDIR/JOB, when it started and ended
(time.time()) and the devices amdrun gave it (HIP_VISIBLE_DEVICES).

usage: python3 queue_rank.py LOGDIR JOB HOLD
"""
import os
import sys
import time

start = time.time()
time.sleep(float(sys.argv[3]))
end = time.time()
line = "%.6f %.6f %s\n" % (start, end, os.environ.get("HIP_VISIBLE_DEVICES", ""))
with open(os.path.join(sys.argv[1], sys.argv[2]), "w") as f:
    f.write(line)
