#!/usr/bin/env python3
"""2,000 small files through plain syscalls, each phase timed in-process (scripts/bench/mount.mjs).

usage: mount-small-files.py DIR [COUNT] [SIZE]; prints one JSON object of seconds per phase.
"""
import json
import os
import sys
import time

directory = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
size = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
payload = (b"0123456789abcdef" * (size // 16 + 1))[:size]
os.makedirs(directory, exist_ok=True)
names = [os.path.join(directory, "f%05d.txt" % i) for i in range(count)]
times = {}

start = time.perf_counter()
for name in names:
    fd = os.open(name, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.write(fd, payload)
    os.close(fd)
times["create"] = time.perf_counter() - start

start = time.perf_counter()
for name in names:
    if os.stat(name).st_size != size:
        sys.exit("wrong size: " + name)
times["stat"] = time.perf_counter() - start

start = time.perf_counter()
for name in names:
    fd = os.open(name, os.O_RDONLY)
    data = os.read(fd, size + 1)
    os.close(fd)
    if data != payload:
        sys.exit("wrong content: " + name)
times["read"] = time.perf_counter() - start

start = time.perf_counter()
for name in names:
    os.unlink(name)
times["unlink"] = time.perf_counter() - start

os.rmdir(directory)
print(json.dumps(times))
