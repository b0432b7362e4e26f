import faulthandler, os, sys, threading, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
r = dist.get_rank()
c = torch._C._distributed_c10d
def dumper():
    time.sleep(4)
    for args in [(True, False, False), (True, True, False)]:
        t = time.time()
        b = c._dump_fr_trace(*args)
        print(r, "dump", args, len(b), "bytes in %.3fs" % (time.time() - t), flush=True)
        open("%s/dump.%d.%d.pkl" % (os.environ["OUT"], r, args[1]), "wb").write(b)
    os._exit(0)
faulthandler.dump_traceback_later(15, exit=True)
t = torch.ones(4); dist.all_reduce(t)
threading.Thread(target=dumper, daemon=True).start()
if r == 1:
    time.sleep(30)
dist.all_reduce(t)
