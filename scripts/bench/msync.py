#!/usr/bin/env python3
"""File side of scripts/bench/msync.mjs: one workload on one file, each operation timed here.

usage: msync.py prepare FILE SIZE
         FILE becomes SIZE random bytes (open O_CREAT|O_TRUNC, write, fsync, close): binary,
         as mapped files usually are (and as fsx writes them)
       msync.py fsync|msync|msync10|paired FILE N
         fsync:   N times: pwrite of 4 bytes at a different page, then fsync
         msync:   the file mapped whole (MAP_SHARED); N times: 4 bytes changed in the
                  mapping at a different page, then msync(MS_SYNC) of the mapping
         msync10: the same mapping; N times: 10 such changes (10 pages), then one msync
         paired:  N times: an fsync operation, then an msync operation (another page)
       prints {"ms": [one duration per operation], "checked": bool} (ms; an msync10
       operation is its 10 changes and the msync; paired: "ms" are the msyncs and
       "fsync_ms" the fsyncs, pair by pair); "checked": the file read back through a fresh
       descriptor holds every byte written.
"""
import json
import mmap
import os
import sys
import time

PAGE = mmap.PAGESIZE


def offset(i, size):
    """A different page each time (16 pages of a 64 KiB file in turn), inside the page too."""
    return ((i * PAGE) + (i * 37) % (PAGE - 8)) % (size - 4)


def stamp(i):
    return b"%04d" % (i % 10000)


def prepare(path, size):
    data = os.urandom(size)
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)
    os.close(fd)


def run(kind, path, n):
    fd = os.open(path, os.O_RDWR)
    size = os.fstat(fd).st_size
    expected = bytearray(os.pread(fd, size, 0))
    times = []
    result = {}
    if kind == "fsync":
        for i in range(n):
            o = offset(i, size)
            t = time.perf_counter_ns()
            os.pwrite(fd, stamp(i), o)
            os.fsync(fd)
            times.append((time.perf_counter_ns() - t) / 1e6)
            expected[o:o + 4] = stamp(i)
    elif kind == "paired":
        m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        fsyncs = []
        for i in range(n):
            o = offset(2 * i, size)
            t = time.perf_counter_ns()
            os.pwrite(fd, stamp(i), o)
            os.fsync(fd)
            fsyncs.append((time.perf_counter_ns() - t) / 1e6)
            expected[o:o + 4] = stamp(i)
            o = offset(2 * i + 1, size)
            t = time.perf_counter_ns()
            m[o:o + 4] = stamp(i)
            m.flush()
            times.append((time.perf_counter_ns() - t) / 1e6)
            expected[o:o + 4] = stamp(i)
        m.close()
        result["fsync_ms"] = fsyncs
    else:
        per_sync = 10 if kind == "msync10" else 1
        m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        k = 0
        for _ in range(n):
            t = time.perf_counter_ns()
            for _ in range(per_sync):
                o = offset(k, size)
                m[o:o + 4] = stamp(k)
                expected[o:o + 4] = stamp(k)
                k += 1
            m.flush()  # msync(MS_SYNC) of the whole mapping
            times.append((time.perf_counter_ns() - t) / 1e6)
        m.close()
    os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    checked = os.pread(fd, size + 1, 0) == bytes(expected)
    os.close(fd)
    print(json.dumps({"ms": times, "checked": checked, **result}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2], int(sys.argv[3]))
    else:
        run(sys.argv[1], sys.argv[2], int(sys.argv[3]))
