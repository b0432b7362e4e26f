"""python -m amdrun: run the amdrun binary this wheel installed, with argv."""
import os
import sys
import sysconfig


def main():
    exe = os.path.join(sysconfig.get_path("scripts"), "amdrun")
    if not os.path.isfile(exe):
        sys.stderr.write("amdrun: the wheel's binary is missing: %s\n" % exe)
        sys.exit(1)
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
