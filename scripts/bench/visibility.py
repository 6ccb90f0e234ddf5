#!/usr/bin/env python3
"""Writer side of scripts/bench/visibility.mjs. Times are CLOCK_MONOTONIC in ms
(time.monotonic_ns), the clock Node's process.hrtime uses, so the two can be compared.

usage: visibility.py seed DIR COUNT SIZE
         COUNT files of SIZE bytes under DIR/seed/dNNN/ (100 per folder), each
         open-write-close, then an fsync of DIR/.settle (the route commits what is pending);
         prints {"files", "write_s", "settle_s"}
       visibility.py writer
         one JSON request a line on stdin, {"path", "size", "fsync", "tag"}: writes the file
         (open O_CREAT|O_TRUNC, write until SIZE bytes, optionally fsync, close, as cp does)
         and answers one JSON line {"open", "close_start", "close_end", "fsync_ms"} (ms),
         or {"error"}; {"clock": true} answers {"now"} (a clock check).
"""
import json
import os
import sys
import time


def now_ms():
    return time.monotonic_ns() / 1e6


def content(tag, size):
    """SIZE bytes of ASCII text starting with TAG (each file different)."""
    head = f"visibility bench file {tag}\n".encode()
    line = b"the quick brown fox jumps over the lazy dog 0123456789\n"
    body = (line * (size // len(line) + 1))[: max(0, size - len(head))]
    return (head + body)[:size]


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def seed(root, count, size):
    start = time.monotonic()
    made = set()
    for i in range(count):
        folder = os.path.join(root, "seed", f"d{i // 100:03d}")
        if folder not in made:
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        fd = os.open(os.path.join(folder, f"f{i:05d}.txt"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        write_all(fd, content(f"seed {i}", size))
        os.close(fd)
    wrote = time.monotonic()
    fd = os.open(os.path.join(root, ".settle"), os.O_CREAT | os.O_WRONLY, 0o644)
    os.fsync(fd)
    os.close(fd)
    print(json.dumps({"files": count, "write_s": wrote - start, "settle_s": time.monotonic() - wrote}), flush=True)


def writer():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        if req.get("clock"):
            print(json.dumps({"now": now_ms()}), flush=True)
            continue
        try:
            data = content(req["tag"], req["size"])
            t_open = now_ms()
            fd = os.open(req["path"], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            write_all(fd, data)
            fsync_ms = None
            if req.get("fsync"):
                t = now_ms()
                os.fsync(fd)
                fsync_ms = now_ms() - t
            t_close = now_ms()
            os.close(fd)
            t_closed = now_ms()
            print(json.dumps({"open": t_open, "close_start": t_close, "close_end": t_closed, "fsync_ms": fsync_ms}), flush=True)
        except OSError as e:
            print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "seed":
        seed(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "writer":
        writer()
    else:
        sys.exit(f"unknown mode {sys.argv[1]}")
