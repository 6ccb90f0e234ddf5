#!/usr/bin/env python3
"""The model server's workload (scripts/bench/transport-models.mjs): COUNT files of 1 KiB in
DIR created (open+write+close), stat'ed, read (open+read+close) and unlinked, each phase
timed in-process; prints one JSON object of microseconds per file and phase.

usage: probe.py DIR [COUNT]
"""
import json
import os
import sys
import time

directory = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
payload = b"0123456789abcdef" * 64
names = [os.path.join(directory, "f%05d" % i) for i in range(count)]


def create(name):
    fd = os.open(name, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.write(fd, payload)
    os.close(fd)


def read(name):
    fd = os.open(name, os.O_RDONLY)
    os.read(fd, 2048)
    os.close(fd)


micros = {}
for phase, step in [("create", create), ("stat", os.stat), ("read", read), ("unlink", os.unlink)]:
    start = time.perf_counter()
    for name in names:
        step(name)
    micros[phase] = (time.perf_counter() - start) * 1e6 / count
print(json.dumps(micros))
