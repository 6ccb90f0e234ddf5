#!/usr/bin/env python3
"""Per-operation loops for scripts/bench/state-scale.mjs, timed inside this one process
(no process start-up in any number). Prints one JSON line per phase as it ends:
{"phase": ..., "ops": done, "of": asked, "seconds": time in the timed calls only}
(and progress lines with "partial": true while it runs).

usage: state-scale-ops.py ops   DIR COUNT BUDGET_S
         create+write+close of 4 KiB, unlink, rename, fsync of a just-written 4 KiB file
       state-scale-ops.py edits DIR COUNT BUDGET_S FILES
         COUNT appends of one line to DIR/small/s<i % FILES>.txt, each open-write-close

A phase stops early once BUDGET_S (for the whole run) has passed; "ops" says how far it
got. Between phases an fsync of DIR/.settle waits for the route to commit what is pending
(untimed), so no phase pays for the one before.
"""
import json
import os
import sys
import time

PAYLOAD = os.urandom(4096)


def emit(**fields):
    print(json.dumps(fields), flush=True)


def settle(root):
    fd = os.open(os.path.join(root, ".settle"), os.O_CREAT | os.O_WRONLY, 0o644)
    os.fsync(fd)
    os.close(fd)


def loop(name, count, deadline, op):
    """Runs op(i) for i < count until the deadline; op returns the seconds it timed.
    A progress line every tenth of the way says how far it got if the run is killed."""
    done, total = 0, 0.0
    step = max(1, count // 10)
    for i in range(count):
        if time.monotonic() > deadline:
            break
        total += op(i)
        done += 1
        if done % step == 0 and done < count:
            emit(phase=name, ops=done, of=count, seconds=total, partial=True)
    emit(phase=name, ops=done, of=count, seconds=total)
    return done


def write_file(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, PAYLOAD)
    return fd


def ops(root, count, deadline):
    d = os.path.join(root, "ops")
    os.makedirs(d, exist_ok=True)
    os.listdir(root)
    settle(root)

    def create(i):
        t = time.perf_counter()
        os.close(write_file(f"{d}/c{i}"))
        return time.perf_counter() - t

    def unlink(i):
        t = time.perf_counter()
        os.unlink(f"{d}/c{i}")
        return time.perf_counter() - t

    def untimed_create(i):
        os.close(write_file(f"{d}/r{i}"))
        return 0.0

    def rename(i):
        t = time.perf_counter()
        os.rename(f"{d}/r{i}", f"{d}/m{i}")
        return time.perf_counter() - t

    def fsync(i):
        fd = write_file(f"{d}/f{i}")
        t = time.perf_counter()
        os.fsync(fd)
        seconds = time.perf_counter() - t
        os.close(fd)
        return seconds

    created = loop("create", count, deadline, create)
    settle(root)
    loop("unlink", created, deadline, unlink)
    settle(root)
    ready = loop("rename-setup", count, deadline, untimed_create)
    settle(root)
    loop("rename", ready, deadline, rename)
    settle(root)
    loop("fsync", count, deadline, fsync)
    settle(root)


def edits(root, count, deadline, files):
    def edit(i):
        line = f"edit {i:06d} of {count}: one small change, appended as one line\n".encode()
        t = time.perf_counter()
        fd = os.open(f"{root}/small/s{i % files:02d}.txt", os.O_WRONLY | os.O_APPEND)
        os.write(fd, line)
        os.close(fd)
        return time.perf_counter() - t

    os.listdir(root)
    loop("edits", count, deadline, edit)
    settle(root)


def main():
    mode, root, count, budget = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    deadline = time.monotonic() + budget
    if mode == "ops":
        ops(root, count, deadline)
    elif mode == "edits":
        edits(root, count, deadline, int(sys.argv[5]))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
