#!/usr/bin/env python3
"""One phase of scripts/bench/memory.mjs over COUNT files of 1 KiB in 100 directories.

usage: memory-files.py DIR create|stat|read|list|reread COUNT; prints the phase's seconds.
"""
import os
import sys
import time

root, phase, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
payload = b"x" * 1024
dirs = [os.path.join(root, "d%03d" % d) for d in range(100)]
names = [os.path.join(dirs[i % 100], "f%06d" % i) for i in range(count)]

start = time.perf_counter()
if phase == "create":
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    for name in names:
        fd = os.open(name, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.write(fd, payload)
        os.close(fd)
elif phase == "stat":
    for name in names:
        os.stat(name)
elif phase in ("read", "reread"):
    for name in names:
        with open(name, "rb") as f:
            if f.read() != payload:
                sys.exit("wrong content: " + name)
elif phase == "list":
    for d in dirs:
        for entry in os.scandir(d):
            entry.stat(follow_symlinks=False)
else:
    sys.exit("unknown phase " + phase)
print("%.3f" % (time.perf_counter() - start))
