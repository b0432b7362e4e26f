"""A rank of the job bench/contain-proof.sh queues with --wait behind the
one it kills: it records when it started, the devices it was given and
(without --cpu) how many compute apps nvidia-smi listed at that moment,
before it touches a GPU itself. usage: contain_check.py OUT [--cpu]"""
import json
import os
import subprocess
import sys
import time

start = time.time()
out = sys.argv[1]
apps = None
if "--cpu" not in sys.argv:
    r = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                       capture_output=True, text=True)
    apps = len([line for line in r.stdout.splitlines() if line.strip()])
rank = os.environ["RANK"]
with open(os.path.join(out, "queued-%s.json" % rank), "w") as f:
    json.dump({"start": start, "rank": int(rank), "apps": apps,
               "visible": os.environ.get("CUDA_VISIBLE_DEVICES", "")}, f)
