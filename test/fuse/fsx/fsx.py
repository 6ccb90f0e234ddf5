#!/usr/bin/env python3
"""
fsx.py: a seeded, reproducible file exerciser in the spirit of fsx (Avadis Tevanian's
"File System eXerciser", as in xfstests' ltp/fsx.c), stdlib only.

It works on a few files (one by default) in --dir and keeps an in-memory model of each
(a bytearray). Operations are chosen at random from --seed; op number k draws everything it
does from random.Random("<seed>:<k>"), so a run is reproducible op by op and a resumed run
continues exactly where the saved one stopped.

Operations:
  read       pread at a random offset/length (sometimes past EOF, sometimes through a second,
             fresh O_RDONLY handle), compared with the model
  write      pwrite at a random offset/length (sometimes at EOF, past EOF leaving a hole, or
             through an O_APPEND handle); the bytes are 8-byte words aligned on file offsets
             that name the op number, so corrupted data says which op wrote it
  truncate   grow or shrink (ftruncate; sometimes truncate(path), or open(O_TRUNC) for 0)
  mmapread   MAP_SHARED mapping of the current size, a random range compared
  mmapwrite  MAP_SHARED mapping of the current size, a random range written, then msync
  fsync      fsync or fdatasync
  reopen     close + open again, then the whole content is checked
  remount    a checkpoint: every handle is closed, the model is saved to --state and the
             script exits with status 3; the driver remounts and runs it again with
             --resume, which reopens the files and checks every byte first
             (--remount-every K: after every K ops; --remount-weight W: also at random;
             --stop-after S: once S seconds have passed, a time budget for drivers)

After every op: the file's size by fstat and by stat(path) against the model. Every
--check-every ops (and after each reopen and each resume): the whole content of every file.
On a mismatch or an unexpected errno: the last 20 ops, the first differing offset (and who
wrote what is there), a reproduction command line, exit status 1.

Exit status: 0 all ops done and clean, 1 failure, 2 usage error, 3 checkpoint (remount).

Usage:
  fsx.py --seed S --ops N --dir DIR [--max-size BYTES] [--max-op-len BYTES] [--files F]
         [--text] [--state FILE [--resume] [--remount-every K] [--remount-weight W]
         [--stop-after SECONDS]] [--check-every N] [--weights kind=w,...] [-v]
"""
import argparse
import base64
import collections
import errno
import json
import mmap
import os
import random
import struct
import sys
import time

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_REMOUNT = 0, 1, 2, 3
STATE_VERSION = 1

KINDS = ["read", "write", "truncate", "mmapread", "mmapwrite", "fsync", "reopen", "remount"]
DEFAULT_WEIGHTS = {"read": 22, "write": 24, "truncate": 8, "mmapread": 7, "mmapwrite": 7, "fsync": 5, "reopen": 6, "remount": 0}
EXTENSIONS = [".bin", ".txt", ".md", ".dat"]
LOG_TAIL = 20
PAGE = mmap.PAGESIZE


class Failure(Exception):
    """A finding: printed with the op log tail, exit 1."""


# ------------------------------------------------------------------ patterns


def word_for(opno, text):
    """The 8-byte word op `opno` writes; text mode stays ASCII (the Hub stores UTF-8 text)."""
    if text:
        return b"%07d\n" % (opno % 10_000_000)
    # 0xff marker (never valid UTF-8), the op number, then 0xfe 0x80 '\n'.
    return b"\xff" + struct.pack(">I", opno & 0xFFFFFFFF) + b"\xfe\x80\n"


def pattern(opno, offset, length, text):
    """Bytes of op `opno` for [offset, offset+length): words aligned on absolute offsets."""
    word = word_for(opno, text)
    start = offset % 8
    reps = (start + length) // 8 + 1
    return (word * reps)[start:start + length]


def who_wrote(data, offset, text):
    """What the aligned 8-byte word around `offset` of `data` looks like."""
    base = offset - offset % 8
    w = bytes(data[base:base + 8])
    if len(w) == 0:
        return "past the end"
    if w == b"\0" * len(w):
        return "zeros (a hole, a grown truncate, or lost data)"
    if text and len(w) == 8 and w[:7].isdigit() and w[7:] == b"\n":
        return "op #%d's pattern" % int(w[:7])
    if not text and len(w) == 8 and w[0] == 0xFF and w[5:] == b"\xfe\x80\n":
        return "op #%d's pattern" % struct.unpack(">I", w[1:5])[0]
    return "mixed bytes %s (a word split between writers, or foreign data)" % w.hex(" ")


def hexdump(data, start, end):
    return bytes(data[start:end]).hex(" ") or "(nothing)"


# ------------------------------------------------------------------ the exerciser


class FileState:
    def __init__(self, name, model):
        self.name = name
        self.model = model  # bytearray
        self.fd = -1


class Fsx:
    def __init__(self, cfg, state=None):
        self.cfg = cfg
        self.dir = cfg["dir"]
        self.text = cfg["text"]
        self.max_size = cfg["max_size"]
        self.max_op_len = cfg["max_op_len"]
        self.weights = cfg["weights"]
        self.verbose = cfg["verbose"]
        self.kinds = [k for k in KINDS if self.weights.get(k, 0) > 0]
        self.kind_weights = [self.weights[k] for k in self.kinds]
        if state is None:
            self.files = [FileState("fsx%d%s" % (i, EXTENSIONS[i % len(EXTENSIONS)]), bytearray()) for i in range(cfg["files"])]
            self.next_op = 1
            self.counts = collections.Counter()
            self.log = collections.deque(maxlen=LOG_TAIL)
            self.segments = 1
        else:
            self.files = [FileState(f["name"], bytearray(base64.b64decode(f["content"]))) for f in state["files"]]
            self.next_op = state["next_op"]
            self.counts = collections.Counter(state["counts"])
            self.log = collections.deque(state["log"], maxlen=LOG_TAIL)
            self.segments = state["segments"] + 1
        self.current = None  # the op being run, for failure reports
        self.where = "start"  # for the reproduction line
        self.started = time.monotonic()

    # -- helpers

    def path(self, f):
        return os.path.join(self.dir, f.name)

    def note(self, opno, text):
        entry = "#%d %s" % (opno, text)
        self.log.append(entry)
        self.current = entry
        if self.verbose:
            print("%9.3f %s" % (time.monotonic() - self.started, entry), flush=True)

    def rand_len(self, rng):
        r = rng.random()
        if r < 0.3:
            n = rng.randint(1, 16)
        elif r < 0.7:
            n = rng.randint(1, 4096)
        else:
            n = rng.randint(1, self.max_op_len)
        return min(n, self.max_op_len)

    def rand_off(self, rng, limit):
        """An offset in [0, limit], biased towards page boundaries."""
        if limit <= 0:
            return 0
        r = rng.random()
        if r < 0.15:
            off = rng.randrange(0, limit // PAGE + 1) * PAGE
        elif r < 0.25:
            off = rng.randrange(0, limit // PAGE + 1) * PAGE + rng.randint(-3, 3)
        else:
            off = rng.randint(0, limit)
        return max(0, min(off, limit))

    def open_all(self, create):
        for f in self.files:
            flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
            f.fd = os.open(self.path(f), flags, 0o644)

    def close_all(self):
        for f in self.files:
            if f.fd >= 0:
                fd, f.fd = f.fd, -1
                os.close(fd)

    # -- checks

    def check_size(self, f):
        want = len(f.model)
        by_fd = os.fstat(f.fd).st_size
        by_path = os.stat(self.path(f)).st_size
        if by_fd != want or by_path != want:
            raise Failure("size mismatch in %s: model %d, fstat %d, stat %d" % (f.name, want, by_fd, by_path))

    def read_whole(self, fd):
        chunks = []
        off = 0
        while True:
            b = os.pread(fd, 1 << 17, off)
            if not b:
                break
            chunks.append(b)
            off += len(b)
        return b"".join(chunks)

    def check_content(self, f, why):
        self.counts["checks"] += 1
        got = self.read_whole(f.fd)
        self.compare(f, got, 0, "whole-file check (%s)" % why, f.model)

    def compare(self, f, got, offset, what, want=None):
        """`got` read at `offset` against `want` (default: the model from `offset` on, as long as `got`)."""
        if want is None:
            want = f.model[offset:offset + len(got)]
        if got == want:
            return
        n = min(len(got), len(want))
        first = next((i for i in range(n) if got[i] != want[i]), n)
        last = max((i for i in range(n) if got[i] != want[i]), default=first)
        differing = sum(1 for i in range(n) if got[i] != want[i])
        at = offset + first
        lo = first - first % 16
        lines = [
            "content mismatch in %s, %s: first differing file offset %d (0x%x); %d bytes read, %d expected; "
            "%d differing bytes in the common part, up to file offset %d; model size %d"
            % (f.name, what, at, at, len(got), len(want), differing, offset + last, len(f.model)),
            "  expected @%d: %s   <- %s" % (offset + lo, hexdump(want, lo, lo + 16), who_wrote(f.model, at, self.text)),
            "  actual   @%d: %s   <- %s" % (offset + lo, hexdump(got, lo, lo + 16), who_wrote(got, first, self.text)),
        ]
        raise Failure("\n".join(lines))

    def check_all(self, why):
        for f in self.files:
            self.check_content(f, why)

    # -- operations

    def op_read(self, rng, opno, f):
        size = len(f.model)
        off = self.rand_off(rng, size + 64) if rng.random() < 0.1 else self.rand_off(rng, max(size - 1, 0))
        n = self.rand_len(rng)
        fresh = rng.random() < 0.1
        self.note(opno, "read %s off=%d len=%d%s (size %d)" % (f.name, off, n, " via a fresh O_RDONLY handle" if fresh else "", size))
        if fresh:
            fd = os.open(self.path(f), os.O_RDONLY)
            try:
                got = os.pread(fd, n, off)
            finally:
                os.close(fd)
        else:
            got = os.pread(f.fd, n, off)
        want = f.model[off:off + n]
        if len(got) != len(want):
            raise Failure("short or long read in %s: asked %d at %d, got %d, expected %d (model size %d)" % (f.name, n, off, len(got), len(want), size))
        self.compare(f, got, off, "read at %d" % off, want)

    def op_write(self, rng, opno, f):
        size = len(f.model)
        r = rng.random()
        mode = "pwrite"
        if r < 0.1 and size < self.max_size:
            mode, off = "append", size
        elif r < 0.2 and size < self.max_size:
            off = size
        elif r < 0.3:
            off = min(self.max_size - 1, size + rng.randint(1, 3 * PAGE))  # past EOF: a hole
        else:
            off = self.rand_off(rng, self.max_size - 1)
        n = max(1, min(self.rand_len(rng), self.max_size - off))
        data = pattern(opno, off, n, self.text)
        self.note(opno, "write %s off=%d len=%d %s (size %d -> %d)" % (f.name, off, n, mode, size, max(size, off + n)))
        if mode == "append":
            fd = os.open(self.path(f), os.O_WRONLY | os.O_APPEND)
            try:
                wrote = os.write(fd, data)
            finally:
                os.close(fd)
        else:
            wrote = os.pwrite(f.fd, data, off)
        if wrote != n:
            raise Failure("short write in %s: %d of %d bytes at %d" % (f.name, wrote, n, off))
        if off > size:
            f.model.extend(b"\0" * (off - size))
        f.model[off:off + n] = data

    def op_truncate(self, rng, opno, f):
        size = len(f.model)
        r = rng.random()
        if r < 0.1:
            new = 0
        elif r < 0.2:
            new = rng.randint(0, self.max_size // PAGE) * PAGE
        elif size == 0 or r < 0.6:
            new = rng.randint(size, self.max_size)
        else:
            new = rng.randint(0, size)
        m = rng.random()
        how = "ftruncate"
        if new == 0 and m < 0.5:
            how = "open(O_TRUNC)"
        elif m < 0.12:
            how = "truncate(path)"
        self.note(opno, "truncate %s %d -> %d (%s, %s)" % (f.name, size, new, how, "grow" if new > size else "shrink" if new < size else "same"))
        if how == "ftruncate":
            os.ftruncate(f.fd, new)
        elif how == "truncate(path)":
            os.truncate(self.path(f), new)
        else:
            os.close(os.open(self.path(f), os.O_WRONLY | os.O_TRUNC))
        if new < size:
            del f.model[new:]
        else:
            f.model.extend(b"\0" * (new - size))

    def op_mmap(self, rng, opno, f, write):
        size = len(f.model)
        kind = "mmapwrite" if write else "mmapread"
        if size == 0:
            self.note(opno, "%s %s skipped (size 0: nothing to map)" % (kind, f.name))
            self.counts["skipped"] += 1
            return
        off = self.rand_off(rng, size - 1)
        n = max(1, min(self.rand_len(rng), size - off))
        self.note(opno, "%s %s off=%d len=%d (MAP_SHARED of %d bytes%s)" % (kind, f.name, off, n, size, ", msync" if write else ""))
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if write else 0)
        mm = mmap.mmap(f.fd, size, flags=mmap.MAP_SHARED, prot=prot)
        try:
            if write:
                data = pattern(opno, off, n, self.text)
                mm[off:off + n] = data
                mm.flush()  # msync(MS_SYNC) of the whole mapping
                f.model[off:off + n] = data
            else:
                got = mm[off:off + n]
                self.compare(f, got, off, "mmap read at %d" % off)
        finally:
            mm.close()

    def op_fsync(self, rng, opno, f):
        data = rng.random() < 0.3
        self.note(opno, "%s %s (size %d)" % ("fdatasync" if data else "fsync", f.name, len(f.model)))
        (os.fdatasync if data else os.fsync)(f.fd)

    def op_reopen(self, rng, opno, f):
        self.note(opno, "reopen %s (close + open O_RDWR, size %d)" % (f.name, len(f.model)))
        fd, f.fd = f.fd, -1
        os.close(fd)
        f.fd = os.open(self.path(f), os.O_RDWR)
        self.check_size(f)
        self.check_content(f, "after reopen")

    # -- the run

    def state_dict(self, done):
        return {
            "version": STATE_VERSION,
            "config": {k: self.cfg[k] for k in ("seed", "ops", "max_size", "max_op_len", "text", "check_every", "remount_every", "weights")},
            "next_op": self.next_op,
            "done": done,
            "segments": self.segments,
            "counts": dict(self.counts),
            "log": list(self.log),
            "files": [{"name": f.name, "size": len(f.model), "content": base64.b64encode(bytes(f.model)).decode()} for f in self.files],
        }

    def save(self, done):
        if not self.cfg["state"]:
            return
        tmp = self.cfg["state"] + ".tmp"
        with open(tmp, "w") as out:
            json.dump(self.state_dict(done), out)
        os.replace(tmp, self.cfg["state"])

    def summary(self, status):
        c = self.counts
        kinds = " ".join("%s=%d" % (k, c.get(k, 0)) for k in KINDS)
        total = self.next_op - 1
        return "fsx: %s seed=%d ops=%d/%d files=%d %s checks=%d skipped=%d segment=%d sizes=%s elapsed=%.1fs" % (
            status, self.cfg["seed"], total, self.cfg["ops"], len(self.files), kinds, c.get("checks", 0), c.get("skipped", 0),
            self.segments, ",".join(str(len(f.model)) for f in self.files), time.monotonic() - self.started)

    def run(self, resume):
        cfg = self.cfg
        if resume:
            self.where = "the check after the remount that followed op #%d" % (self.next_op - 1)
            self.note(self.next_op - 1, "resume (segment %d): open every file, check sizes and every byte" % self.segments)
            self.open_all(create=False)
            for f in self.files:
                self.check_size(f)
            self.check_all("after resume")
        else:
            self.open_all(create=True)
        while self.next_op <= cfg["ops"]:
            opno = self.next_op
            self.where = "op #%d" % opno
            rng = random.Random("%d:%d" % (cfg["seed"], opno))
            kind = rng.choices(self.kinds, self.kind_weights)[0]
            f = self.files[rng.randrange(len(self.files))]
            remount = kind == "remount" or (cfg["remount_every"] and opno % cfg["remount_every"] == 0 and opno < cfg["ops"])
            stop = cfg["stop_after"] and time.monotonic() - self.started >= cfg["stop_after"]
            if kind == "remount":
                self.note(opno, "remount (random)")
            elif kind == "read":
                self.op_read(rng, opno, f)
            elif kind == "write":
                self.op_write(rng, opno, f)
            elif kind == "truncate":
                self.op_truncate(rng, opno, f)
            elif kind in ("mmapread", "mmapwrite"):
                self.op_mmap(rng, opno, f, kind == "mmapwrite")
            elif kind == "fsync":
                self.op_fsync(rng, opno, f)
            elif kind == "reopen":
                self.op_reopen(rng, opno, f)
            self.counts[kind] += 1
            if kind != "remount":
                self.check_size(f)
            if cfg["check_every"] and opno % cfg["check_every"] == 0:
                self.check_all("every %d ops" % cfg["check_every"])
            self.next_op = opno + 1
            if (remount or stop) and self.next_op <= cfg["ops"]:
                if stop and not remount:
                    self.counts["remount"] += 1
                    self.note(opno, "stop: --stop-after %gs passed; close every file, save the model, exit %d" % (cfg["stop_after"], EXIT_REMOUNT))
                elif kind != "remount":
                    self.counts["remount"] += 1
                    self.note(opno, "remount (every %d ops): close every file, save the model, exit %d" % (cfg["remount_every"], EXIT_REMOUNT))
                self.close_all()
                self.save(done=False)
                print(self.summary("CHECKPOINT"), flush=True)
                return EXIT_REMOUNT
        # The end: one last whole check, through a close and a fresh open.
        self.where = "the final check after op #%d" % cfg["ops"]
        self.close_all()
        self.open_all(create=False)
        for f in self.files:
            self.check_size(f)
        self.check_all("at the end, after close and open")
        self.close_all()
        self.save(done=True)
        print(self.summary("OK"), flush=True)
        return EXIT_OK


def parse_weights(text):
    weights = dict(DEFAULT_WEIGHTS)
    if text:
        for part in text.split(","):
            k, _, v = part.partition("=")
            if k not in KINDS or not v.isdigit():
                raise SystemExit("fsx: bad --weights entry %r (kinds: %s)" % (part, ", ".join(KINDS)))
            weights[k] = int(v)
    return weights


def main(argv):
    p = argparse.ArgumentParser(description="seeded random file exerciser (fsx-like)")
    p.add_argument("--seed", type=int)
    p.add_argument("--ops", type=int, help="total ops of the whole run (across resumes)")
    p.add_argument("--dir", required=True)
    p.add_argument("--max-size", type=int, default=256 * 1024)
    p.add_argument("--max-op-len", type=int, default=64 * 1024)
    p.add_argument("--files", type=int, default=1)
    p.add_argument("--text", action="store_true", help="ASCII-only patterns (routes that store text, the Hub)")
    p.add_argument("--check-every", type=int, default=16, help="whole-content check of every file every N ops (0: only at reopen/resume/end)")
    p.add_argument("--state", help="JSON file for the model at a checkpoint (remount) and at the end")
    p.add_argument("--resume", action="store_true", help="continue from --state")
    p.add_argument("--remount-every", type=int, default=0, help="checkpoint (exit 3) after every K ops; needs --state")
    p.add_argument("--remount-weight", type=int, default=None, help="weight of random remount checkpoints (default 0)")
    p.add_argument("--stop-after", type=float, default=0, help="checkpoint (exit 3, as a remount) once this many seconds have passed (a time budget)")
    p.add_argument("--weights", default="", help="kind=weight,... overriding the defaults %s" % DEFAULT_WEIGHTS)
    p.add_argument("-v", "--verbose", action="store_true", help="print every op")
    a = p.parse_args(argv)

    state = None
    if a.resume:
        if not a.state:
            p.error("--resume needs --state")
        with open(a.state) as inp:
            state = json.load(inp)
        if state.get("version") != STATE_VERSION:
            p.error("state file %s: version %r, expected %d" % (a.state, state.get("version"), STATE_VERSION))
        if state.get("done"):
            p.error("state file %s: the run is already complete" % a.state)
        saved = state["config"]
        cfg = dict(saved)
        if a.ops is not None:
            cfg["ops"] = a.ops
        cfg["files"] = len(state["files"])
    else:
        if a.seed is None or a.ops is None:
            p.error("--seed and --ops are required (unless --resume)")
        weights = parse_weights(a.weights)
        cfg = {
            "seed": a.seed, "ops": a.ops, "max_size": a.max_size, "max_op_len": a.max_op_len, "files": a.files,
            "text": a.text, "check_every": a.check_every, "remount_every": a.remount_every, "weights": weights,
        }
    if a.remount_weight is not None:
        cfg["weights"] = dict(cfg["weights"], remount=a.remount_weight)
    if (cfg["remount_every"] or cfg["weights"].get("remount")) and not a.state:
        p.error("remount checkpoints need --state FILE")
    if cfg["max_size"] < 1 or cfg["max_op_len"] < 1 or cfg["files"] < 1 or cfg["ops"] < 0:
        p.error("--max-size, --max-op-len and --files must be positive, --ops not negative")
    if a.stop_after and not a.state:
        p.error("--stop-after needs --state FILE")
    cfg.update(dir=a.dir, state=a.state, verbose=a.verbose, stop_after=a.stop_after)

    fsx = Fsx(cfg, state)
    try:
        return fsx.run(resume=a.resume)
    except (Failure, OSError) as e:
        if isinstance(e, OSError):
            name = errno.errorcode.get(e.errno, str(e.errno))
            what = "unexpected errno %s (%s)%s" % (name, e.strerror, " on %s" % e.filename if e.filename else "")
        else:
            what = str(e)
        out = sys.stdout
        print("fsx: FAILURE at %s (seed %d)" % (fsx.current or "start", cfg["seed"]), file=out)
        print(what, file=out)
        print("last %d ops:" % len(fsx.log), file=out)
        for entry in fsx.log:
            print("  " + entry, file=out)
        failed_at = min(fsx.next_op, cfg["ops"])
        extra = "".join([
            " --max-size %d" % cfg["max_size"] if cfg["max_size"] != 256 * 1024 else "",
            " --max-op-len %d" % cfg["max_op_len"] if cfg["max_op_len"] != 64 * 1024 else "",
            " --files %d" % cfg["files"] if cfg["files"] != 1 else "",
            " --text" if cfg["text"] else "",
            " --check-every %d" % cfg["check_every"] if cfg["check_every"] != 16 else "",
            " --remount-every %d --state STATE" % cfg["remount_every"] if cfg["remount_every"] else "",
        ])
        print("reproduce: fsx.py --seed %d --ops %d --dir DIR%s   (failed in %s, segment %d)" % (cfg["seed"], failed_at, extra, fsx.where, fsx.segments), file=out)
        print(fsx.summary("FAILED"), file=out, flush=True)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
