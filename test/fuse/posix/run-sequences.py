#!/usr/bin/env python3
"""POSIX syscall sequences for the differential conformance test (test/fuse/posix-diff.test.ts).

usage: run-sequences.py ROOT
Runs every sequence in a fresh directory under ROOT (which must exist) and prints one JSON
line per step: {"cat": category, "id": step id, "result": what the call returned or
"errno:NAME"}. The same script runs on the local disk and on mounts; the test compares
the outputs step by step. Categories follow pjdfstest: open, creat, read-write, truncate,
rename, unlink, mkdir, rmdir, link, symlink, chmod, utimensat, stat, readdir, owners,
sticky-setgid, fifos (with unix sockets and device nodes), ctime-nlink, names.

Run it as root: some steps run as other users, in a forked child that drops to nobody
(65534:65534) or daemon (1:1) and sends its results back through a pipe (as_user); ROOT and
the directories above it must be searchable by them. A result is a value or a relation
(ctime moved, same inode), never a raw time, inode number or path of the run's directory.
Nothing waits unboundedly: a child is killed after CHILD_TIMEOUT seconds and the whole run
ends itself after RUN_TIMEOUT.
"""
import ctypes
import errno
import json
import os
import select
import shutil
import signal
import socket
import stat
import sys
import time

ROOT = sys.argv[1]
CONTENT = b"hello world\n"
_counter = [0]
_out = []


def emit(cat, seq, step, result):
    _out.append({"cat": cat, "id": "%s/%s/%s" % (cat, seq, step), "result": result})


def call(fn, *args, **kwargs):
    """The call's result, or errno:NAME."""
    try:
        return fn(*args, **kwargs)
    except OSError as e:
        return "errno:" + errno.errorcode.get(e.errno, str(e.errno))


def fresh():
    """A new empty directory for one sequence; the previous one is removed (it keeps key-value
    backends small: their per-call cost grows with the number of files they hold)."""
    cleanup()
    _counter[0] += 1
    base = os.path.join(ROOT, "s%04d" % _counter[0])
    os.mkdir(base)
    # The sequence works one level down: removing the previous sequence lists ROOT, and a
    # directory made where a mount holds a fresh listing is a case of its own (see
    # ctime-nlink/listed-parent); here every sequence starts the same, whatever the timing.
    d = os.path.join(base, "w")
    os.mkdir(d)
    return d


def cleanup():
    if _counter[0] > 0:
        shutil.rmtree(os.path.join(ROOT, "s%04d" % _counter[0]), ignore_errors=True)


def put(path, data=CONTENT):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.close(fd)


def content(path):
    def read():
        fd = os.open(path, os.O_RDONLY)
        try:
            chunks = []
            while True:
                b = os.read(fd, 65536)
                if not b:
                    break
                chunks.append(b)
            return b"".join(chunks).decode("latin1")
        finally:
            os.close(fd)
    return call(read)


def kind(mode):
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def describe(path):
    """Type and size of a file, type of a directory (sizes of directories differ by design)."""
    def go():
        st = os.lstat(path)
        k = kind(st.st_mode)
        return "%s:%d" % (k, st.st_size) if k == "file" else k
    return call(go)


def listing(d):
    return call(lambda: sorted(os.listdir(d)))


def closing(fd):
    if isinstance(fd, int):
        call(os.close, fd)


# ---------------------------------------------------------------- helpers for owners, links, special files

NOBODY, NOGROUP, DAEMON = 65534, 65534, 1


def ftype(mode):
    """The type of any inode, as a word."""
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "dir"), (stat.S_ISLNK, "symlink"), (stat.S_ISFIFO, "fifo"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "char"), (stat.S_ISBLK, "block")):
        if test(mode):
            return name
    return "unknown"


def kind_and_size(stat_call, path):
    """Type and size (a symlink's size is its target's length) as stat_call (os.stat, os.lstat) sees it."""
    def go():
        st = stat_call(path)
        t = ftype(st.st_mode)
        return t if t == "dir" else "%s:%d" % (t, st.st_size)
    return call(go)


def lsdesc(path):
    """Type and size of anything, not following a last symlink."""
    return kind_and_size(os.lstat, path)


def sdesc(path):
    """Like lsdesc, following symlinks."""
    return kind_and_size(os.stat, path)


def ids(path):
    """uid:gid, not following a last symlink (the same numbers on the disk and a mount when owners work)."""
    return call(lambda: "%d:%d" % (os.lstat(path).st_uid, os.lstat(path).st_gid))


def perm(path):
    """Permission bits with setuid/setgid/sticky, not following a last symlink."""
    return call(lambda: "%o" % stat.S_IMODE(os.lstat(path).st_mode))


def nlink(path):
    return call(lambda: os.lstat(path).st_nlink)


def same_inode(a, b):
    return call(lambda: os.lstat(a).st_ino == os.lstat(b).st_ino and os.lstat(a).st_dev == os.lstat(b).st_dev)


def ctime_ns(path):
    return os.lstat(path).st_ctime_ns


def mtime_ns(path):
    return os.lstat(path).st_mtime_ns


def mtime_is(path, ms):
    """Whether the mtime (not following a last symlink) is `ms` milliseconds: a relation, not the time."""
    return call(lambda: os.lstat(path).st_mtime_ns // 1000000 == ms)


SETTLE = 1.2  # seconds: longer than the mount's attribute TTLs (the kernel's and the vfs's, 1 s)


def settle():
    """Waits until no cache of a mount holds what the steps so far made: the step after sees
    what a fresh look sees. Used once before a group of before/after comparisons, each on its
    own file, so that none of them measures what an earlier one left behind."""
    time.sleep(SETTLE)


TICK = 0.02  # ext4 and the mount keep nanoseconds: 20 ms apart is always a different time


def moved(path, action, field=ctime_ns, after_path=None):
    """Whether `field` (ctime by default) of `path` (after the action: of `after_path`, when it
    moves the file) changed across `action`, which runs after a short pause: a relation, the
    same on the disk and a mount, never the raw time. Returns (the action's result, moved)."""
    before = call(field, path)
    time.sleep(TICK)
    result = call(action)
    after = call(field, after_path or path)
    if not isinstance(before, int):
        return result, before
    if not isinstance(after, int):
        return result, after
    return result, after != before


def write_all(path, data, flags=os.O_WRONLY | os.O_TRUNC):
    fd = os.open(path, flags)
    try:
        view = data
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    return len(data)


CHILD_TIMEOUT = 15


def as_user(fn, uid=NOBODY, gid=NOGROUP, groups=None):
    """Runs fn() in a forked child that has dropped root for uid/gid (and `groups`, default
    just gid), and returns what it returned: a list of (step, result) pairs, sent back as
    JSON through a pipe. The child is killed after CHILD_TIMEOUT seconds (it also sets an
    alarm for itself), so a stuck call never hangs the run."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns, never runs the parent's code
        try:
            os.close(r)
            signal.alarm(CHILD_TIMEOUT)
            os.setgroups([gid] if groups is None else groups)
            os.setgid(gid)
            os.setuid(uid)
            data = json.dumps(fn(), ensure_ascii=False).encode()
        except BaseException as e:  # noqa: BLE001 — everything is reported, nothing escapes
            data = json.dumps([["child", "failed: %r" % (e,)]]).encode()
        try:
            while data:
                data = data[os.write(w, data):]
        finally:
            os._exit(0)
    os.close(w)
    chunks, deadline, timed_out = [], time.monotonic() + CHILD_TIMEOUT + 2, False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([r], [], [], left)
            if ready:
                b = os.read(r, 65536)
                if not b:
                    break
                chunks.append(b)
    finally:
        os.close(r)
        if timed_out:
            call(os.kill, pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if timed_out:
        return [["child", "timeout"]]
    try:
        return json.loads(b"".join(chunks).decode())
    except ValueError:
        return [["child", "no answer"]]


def emit_all(cat, seq, pairs):
    for step, result in pairs:
        emit(cat, seq, step, result)


class Steps(list):
    """A child's results, in order."""
    def add(self, step, result):
        self.append([step, result])
        return result


def fd_ok(path, flags, mode=0o644):
    """open(2) and close: "ok" or errno:NAME."""
    fd = call(os.open, path, flags, mode)
    if isinstance(fd, int):
        os.close(fd)
        return "ok"
    return fd


# ---------------------------------------------------------------- open

ACCESS = [("RDONLY", os.O_RDONLY), ("WRONLY", os.O_WRONLY), ("RDWR", os.O_RDWR)]
EXTRA = [("CREAT", os.O_CREAT), ("EXCL", os.O_EXCL), ("TRUNC", os.O_TRUNC), ("APPEND", os.O_APPEND)]


def flag_combos():
    for aname, aflag in ACCESS:
        for mask in range(16):
            names, flags = [aname], aflag
            for i, (n, f) in enumerate(EXTRA):
                if mask & (1 << i):
                    names.append(n)
                    flags |= f
            yield "|".join(names), flags
    yield "RDONLY|DIRECTORY", os.O_RDONLY | os.O_DIRECTORY
    yield "WRONLY|DIRECTORY", os.O_WRONLY | os.O_DIRECTORY
    yield "RDWR|CREAT|DIRECTORY", os.O_RDWR | os.O_CREAT | os.O_DIRECTORY
    yield "RDONLY|NOFOLLOW", os.O_RDONLY | os.O_NOFOLLOW
    yield "RDWR|NOFOLLOW", os.O_RDWR | os.O_NOFOLLOW
    yield "WRONLY|CREAT|NOFOLLOW", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW


def seq_open():
    for fname, flags in flag_combos():
        # Bad parents matter only for the plain and the creating opens.
        bad_parents = ["missing-parent", "under-file"] if fname in ("RDONLY", "WRONLY|CREAT", "RDWR|CREAT|EXCL") else []
        for target in ["missing", "file", "dir"] + bad_parents:
            d = fresh()
            if target in ("file", "under-file"):
                put(os.path.join(d, "file"))
            if target == "dir":
                os.mkdir(os.path.join(d, "dir"))
            path = {
                "missing": os.path.join(d, "new"),
                "file": os.path.join(d, "file"),
                "dir": os.path.join(d, "dir"),
                "missing-parent": os.path.join(d, "nodir", "new"),
                "under-file": os.path.join(d, "file", "new"),
            }[target]
            seq = "%s@%s" % (fname, target)
            fd = call(os.open, path, flags, 0o644)
            emit("open", seq, "open", "ok" if isinstance(fd, int) else fd)
            if isinstance(fd, int):
                emit("open", seq, "fstat", call(lambda: kind(os.fstat(fd).st_mode) + ":%d" % os.fstat(fd).st_size if not stat.S_ISDIR(os.fstat(fd).st_mode) else "dir"))
                emit("open", seq, "read", call(lambda: os.read(fd, 100).decode("latin1")))
                emit("open", seq, "write", call(os.write, fd, b"XY"))
                emit("open", seq, "close", call(os.close, fd))
            emit("open", seq, "after", describe(path))
            if target in ("file", "missing"):
                emit("open", seq, "content", content(path))


# ---------------------------------------------------------------- creat

def seq_creat():
    for target in ["missing", "file", "dir", "missing-parent", "under-file"]:
        d = fresh()
        put(os.path.join(d, "file"))
        os.mkdir(os.path.join(d, "dir"))
        path = {"missing": "new", "file": "file", "dir": "dir", "missing-parent": "nodir/new", "under-file": "file/new"}[target]
        path = os.path.join(d, path)
        fd = call(os.open, path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        emit("creat", target, "creat", "ok" if isinstance(fd, int) else fd)
        if isinstance(fd, int):
            emit("creat", target, "write", call(os.write, fd, b"abc"))
            emit("creat", target, "close", call(os.close, fd))
        emit("creat", target, "after", describe(path))
        emit("creat", target, "listing", listing(d))
    # mode bits of a new file (the kernel applies the umask before the filesystem sees it)
    for mode in (0o600, 0o640, 0o755):
        d = fresh()
        path = os.path.join(d, "m")
        old = os.umask(0o022)
        try:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, mode)
            os.close(fd)
        finally:
            os.umask(old)
        emit("creat", "mode-%o" % mode, "perm", call(lambda: "%o" % stat.S_IMODE(os.stat(path).st_mode)))


# ---------------------------------------------------------------- read-write

def seq_read_write():
    d = fresh()
    p = os.path.join(d, "f")
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    emit("read-write", "basic", "write", call(os.write, fd, b"0123456789"))
    emit("read-write", "basic", "lseek-cur", call(os.lseek, fd, 0, os.SEEK_CUR))
    emit("read-write", "basic", "read-at-eof", call(lambda: os.read(fd, 10).decode()))
    emit("read-write", "basic", "pread-0-4", call(lambda: os.pread(fd, 4, 0).decode()))
    emit("read-write", "basic", "pread-8-10", call(lambda: os.pread(fd, 10, 8).decode()))
    emit("read-write", "basic", "pread-past-eof", call(lambda: os.pread(fd, 10, 100).decode()))
    emit("read-write", "basic", "pwrite-middle", call(os.pwrite, fd, b"AB", 3))
    emit("read-write", "basic", "pwrite-hole", call(os.pwrite, fd, b"Z", 15))
    emit("read-write", "basic", "fstat-size", call(lambda: os.fstat(fd).st_size))
    emit("read-write", "basic", "pread-all", call(lambda: os.pread(fd, 100, 0).decode("latin1")))
    emit("read-write", "basic", "lseek-end", call(os.lseek, fd, 0, os.SEEK_END))
    emit("read-write", "basic", "lseek-negative", call(os.lseek, fd, -100, os.SEEK_SET))
    emit("read-write", "basic", "close", call(os.close, fd))
    emit("read-write", "basic", "content", content(p))
    emit("read-write", "basic", "size", describe(p))

    # O_APPEND: every write goes to the end, whatever the offset
    put(p, b"abc")
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    emit("read-write", "append", "lseek-0", call(os.lseek, fd, 0, os.SEEK_SET))
    emit("read-write", "append", "write", call(os.write, fd, b"def"))
    emit("read-write", "append", "offset", call(os.lseek, fd, 0, os.SEEK_CUR))
    emit("read-write", "append", "close", call(os.close, fd))
    emit("read-write", "append", "content", content(p))

    # access mode is enforced per descriptor
    fd = os.open(p, os.O_RDONLY)
    emit("read-write", "modes", "write-on-rdonly", call(os.write, fd, b"x"))
    os.close(fd)
    fd = os.open(p, os.O_WRONLY)
    emit("read-write", "modes", "read-on-wronly", call(os.read, fd, 1))
    os.close(fd)
    emit("read-write", "modes", "content", content(p))

    # two descriptors on one file: a reader sees what a writer wrote before it closed
    fw = os.open(p, os.O_WRONLY | os.O_TRUNC)
    os.write(fw, b"shared")
    fr = os.open(p, os.O_RDONLY)
    emit("read-write", "two-fds", "read-before-close", call(lambda: os.read(fr, 100).decode()))
    os.close(fw)
    os.close(fr)
    emit("read-write", "two-fds", "content", content(p))

    # a large write across many requests, read back
    big = bytes(range(256)) * 4096 * 3  # 3 MiB
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    n = 0
    while n < len(big):
        n += os.write(fd, big[n:n + 200000])
    os.close(fd)
    emit("read-write", "large", "size", describe(p))
    fd = os.open(p, os.O_RDONLY)
    got = os.pread(fd, len(big) + 10, 0)
    emit("read-write", "large", "equal", got == big)
    emit("read-write", "large", "pread-tail", call(lambda: os.pread(fd, 4, len(big) - 2).hex()))
    os.close(fd)
    dfd = os.open(d, os.O_RDONLY)
    emit("read-write", "dir", "read-dir-fd", call(os.read, dfd, 1))
    os.close(dfd)


# ---------------------------------------------------------------- truncate

def seq_truncate():
    d = fresh()
    p = os.path.join(d, "f")
    put(p, b"0123456789")
    emit("truncate", "path", "shrink", call(os.truncate, p, 4))
    emit("truncate", "path", "after-shrink", content(p))
    emit("truncate", "path", "grow", call(os.truncate, p, 8))
    emit("truncate", "path", "after-grow", call(lambda: content(p).encode("latin1").hex()))
    emit("truncate", "path", "zero", call(os.truncate, p, 0))
    emit("truncate", "path", "after-zero", describe(p))
    emit("truncate", "path", "missing", call(os.truncate, os.path.join(d, "nope"), 0))
    emit("truncate", "path", "dir", call(os.truncate, d, 0))
    emit("truncate", "path", "negative", call(os.truncate, p, -1))
    put(p, b"abcdef")
    fd = os.open(p, os.O_RDWR)
    emit("truncate", "fd", "shrink", call(os.ftruncate, fd, 2))
    emit("truncate", "fd", "fstat", call(lambda: os.fstat(fd).st_size))
    emit("truncate", "fd", "grow", call(os.ftruncate, fd, 5))
    emit("truncate", "fd", "pread", call(lambda: os.pread(fd, 10, 0).hex()))
    emit("truncate", "fd", "write-after", call(os.pwrite, fd, b"Q", 4))
    os.close(fd)
    emit("truncate", "fd", "content", call(lambda: content(p).encode("latin1").hex()))
    fd = os.open(p, os.O_RDONLY)
    emit("truncate", "fd", "rdonly", call(os.ftruncate, fd, 0))
    os.close(fd)
    emit("truncate", "fd", "unchanged", describe(p))
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    emit("truncate", "o_trunc", "fstat", call(lambda: os.fstat(fd).st_size))
    os.close(fd)
    emit("truncate", "o_trunc", "after", describe(p))


# ---------------------------------------------------------------- rename

def seq_rename():
    cases = [
        ("file-to-new", lambda d: (put(d + "/a", b"A"),), "a", "b"),
        ("file-over-file", lambda d: (put(d + "/a", b"A"), put(d + "/b", b"B")), "a", "b"),
        ("file-over-empty-dir", lambda d: (put(d + "/a", b"A"), os.mkdir(d + "/b")), "a", "b"),
        ("dir-over-file", lambda d: (os.mkdir(d + "/a"), put(d + "/b", b"B")), "a", "b"),
        ("dir-to-new", lambda d: (os.mkdir(d + "/a"), put(d + "/a/x", b"X")), "a", "b"),
        ("dir-over-empty-dir", lambda d: (os.mkdir(d + "/a"), put(d + "/a/x", b"X"), os.mkdir(d + "/b")), "a", "b"),
        ("dir-over-nonempty-dir", lambda d: (os.mkdir(d + "/a"), os.mkdir(d + "/b"), put(d + "/b/y", b"Y")), "a", "b"),
        ("dir-into-own-subdir", lambda d: (os.mkdir(d + "/a"), os.mkdir(d + "/a/sub")), "a", "a/sub/a"),
        ("dir-onto-itself", lambda d: (os.mkdir(d + "/a"),), "a", "a"),
        ("file-onto-itself", lambda d: (put(d + "/a", b"A"),), "a", "a"),
        ("missing-source", lambda d: (), "a", "b"),
        ("missing-target-parent", lambda d: (put(d + "/a", b"A"),), "a", "nodir/b"),
        ("target-parent-is-file", lambda d: (put(d + "/a", b"A"), put(d + "/f", b"F")), "a", "f/b"),
        ("file-into-subdir", lambda d: (put(d + "/a", b"A"), os.mkdir(d + "/sub")), "a", "sub/a"),
        ("nested-dir", lambda d: (os.makedirs(d + "/a/b/c"), put(d + "/a/b/c/z", b"Z")), "a", "m"),
        ("source-under-file", lambda d: (put(d + "/f", b"F"),), "f/a", "b"),
    ]
    for name, setup, src, dst in cases:
        d = fresh()
        setup(d)
        emit("rename", name, "rename", call(os.rename, os.path.join(d, src), os.path.join(d, dst)))
        emit("rename", name, "source", describe(os.path.join(d, src)))
        emit("rename", name, "target", describe(os.path.join(d, dst)))
        emit("rename", name, "listing", listing(d))
        tree = []
        for base, dirs, files in os.walk(d):
            for f in sorted(files):
                tree.append("%s=%s" % (os.path.relpath(os.path.join(base, f), d), content(os.path.join(base, f))))
        emit("rename", name, "tree", sorted(tree))
    # an open file renamed keeps working through its descriptor
    d = fresh()
    put(d + "/a", b"old")
    fd = os.open(d + "/a", os.O_RDWR)
    emit("rename", "open-file", "rename", call(os.rename, d + "/a", d + "/b"))
    emit("rename", "open-file", "pwrite", call(os.pwrite, fd, b"NEW", 0))
    emit("rename", "open-file", "close", call(os.close, fd))
    emit("rename", "open-file", "content", content(d + "/b"))
    emit("rename", "open-file", "listing", listing(d))
    # editor save: write a temp file, rename it over the target
    d = fresh()
    put(d + "/doc", b"v1")
    put(d + "/.doc.tmp", b"v2")
    emit("rename", "editor-save", "rename", call(os.rename, d + "/.doc.tmp", d + "/doc"))
    emit("rename", "editor-save", "content", content(d + "/doc"))
    emit("rename", "editor-save", "listing", listing(d))


# ---------------------------------------------------------------- unlink

def seq_unlink():
    d = fresh()
    put(d + "/f")
    os.mkdir(d + "/dir")
    emit("unlink", "file", "unlink", call(os.unlink, d + "/f"))
    emit("unlink", "file", "stat", describe(d + "/f"))
    emit("unlink", "file", "again", call(os.unlink, d + "/f"))
    emit("unlink", "dir", "unlink", call(os.unlink, d + "/dir"))
    emit("unlink", "missing", "unlink", call(os.unlink, d + "/nope"))
    emit("unlink", "under-file", "unlink", call(os.unlink, d + "/dir/x/y"))
    put(d + "/g")
    emit("unlink", "under-regular", "unlink", call(os.unlink, d + "/g/x"))
    emit("unlink", "listing", "after", listing(d))
    # an unlinked open file stays readable and writable through its descriptor
    put(d + "/open", b"still here")
    fd = os.open(d + "/open", os.O_RDWR)
    emit("unlink", "open-file", "unlink", call(os.unlink, d + "/open"))
    emit("unlink", "open-file", "read", call(lambda: os.pread(fd, 100, 0).decode()))
    emit("unlink", "open-file", "write", call(os.pwrite, fd, b"S", 0))
    emit("unlink", "open-file", "fstat-size", call(lambda: os.fstat(fd).st_size))
    emit("unlink", "open-file", "close", call(os.close, fd))
    emit("unlink", "open-file", "gone", describe(d + "/open"))
    emit("unlink", "open-file", "listing", listing(d))


# ---------------------------------------------------------------- mkdir / rmdir

def seq_mkdir():
    d = fresh()
    put(d + "/f")
    emit("mkdir", "new", "mkdir", call(os.mkdir, d + "/a"))
    emit("mkdir", "new", "stat", describe(d + "/a"))
    emit("mkdir", "new", "nlink", call(lambda: os.stat(d + "/a").st_nlink))
    emit("mkdir", "existing-dir", "mkdir", call(os.mkdir, d + "/a"))
    emit("mkdir", "existing-file", "mkdir", call(os.mkdir, d + "/f"))
    emit("mkdir", "missing-parent", "mkdir", call(os.mkdir, d + "/x/y"))
    emit("mkdir", "parent-is-file", "mkdir", call(os.mkdir, d + "/f/y"))
    emit("mkdir", "nested", "mkdir", call(os.mkdir, d + "/a/b"))
    emit("mkdir", "nested", "listing", listing(d + "/a"))
    emit("mkdir", "mode", "mkdir", call(os.mkdir, d + "/m", 0o700))
    emit("mkdir", "mode", "perm", call(lambda: "%o" % stat.S_IMODE(os.stat(d + "/m").st_mode)))
    emit("mkdir", "listing", "after", listing(d))


def seq_rmdir():
    d = fresh()
    os.mkdir(d + "/empty")
    os.mkdir(d + "/full")
    put(d + "/full/x")
    os.mkdir(d + "/withdir")
    os.mkdir(d + "/withdir/sub")
    put(d + "/f")
    emit("rmdir", "empty", "rmdir", call(os.rmdir, d + "/empty"))
    emit("rmdir", "empty", "stat", describe(d + "/empty"))
    emit("rmdir", "non-empty", "rmdir", call(os.rmdir, d + "/full"))
    emit("rmdir", "non-empty-subdir", "rmdir", call(os.rmdir, d + "/withdir"))
    emit("rmdir", "missing", "rmdir", call(os.rmdir, d + "/nope"))
    emit("rmdir", "file", "rmdir", call(os.rmdir, d + "/f"))
    emit("rmdir", "dot", "rmdir", call(os.rmdir, d + "/full/."))
    emit("rmdir", "missing-parent", "rmdir", call(os.rmdir, d + "/x/y"))
    emit("rmdir", "emptied", "unlink", call(os.unlink, d + "/full/x"))
    emit("rmdir", "emptied", "rmdir", call(os.rmdir, d + "/full"))
    emit("rmdir", "listing", "after", listing(d))


# ---------------------------------------------------------------- link / symlink

def seq_link():
    d = fresh()
    put(d + "/f", b"linked")
    emit("link", "file", "link", call(os.link, d + "/f", d + "/g"))
    emit("link", "file", "nlink", call(lambda: os.stat(d + "/f").st_nlink))
    emit("link", "file", "target", describe(d + "/g"))
    emit("link", "missing-source", "link", call(os.link, d + "/nope", d + "/h"))
    emit("link", "existing-target", "link", call(os.link, d + "/f", d + "/f"))
    emit("link", "dir", "link", call(os.link, d, d + "/dirlink"))
    emit("link", "listing", "after", listing(d))

    C = "link"
    # the count of names: 1, 2, 3, and back
    d = fresh()
    a, b, c = d + "/a", d + "/b", d + "/c"
    put(a, b"one")
    S = "counts"
    emit(C, S, "nlink-1", nlink(a))
    emit(C, S, "link-b", call(os.link, a, b))
    emit(C, S, "nlink-a-2", nlink(a))
    emit(C, S, "nlink-b-2", nlink(b))
    emit(C, S, "same-inode-a-b", same_inode(a, b))
    emit(C, S, "link-c-from-b", call(os.link, b, c))
    emit(C, S, "nlink-a-3", nlink(a))
    emit(C, S, "nlink-c-3", call(lambda: os.stat(c).st_nlink))
    emit(C, S, "same-inode-a-c", same_inode(a, c))
    emit(C, S, "listing-types", call(lambda: sorted("%s:%s" % (e.name, "file" if e.is_file(follow_symlinks=False) else "other") for e in os.scandir(d))))
    emit(C, S, "unlink-b", call(os.unlink, b))
    emit(C, S, "nlink-a-after-unlink", nlink(a))
    emit(C, S, "nlink-c-after-unlink", nlink(c))
    emit(C, S, "unlink-a", call(os.unlink, a))
    emit(C, S, "nlink-c-last", nlink(c))
    emit(C, S, "content-c", content(c))
    emit(C, S, "listing", listing(d))

    # one file, two names: what is done through one is seen through the other
    d = fresh()
    a, b = d + "/a", d + "/b"
    put(a, b"12345")
    S = "shared"
    emit(C, S, "link", call(os.link, a, b))
    emit(C, S, "write-through-b", call(write_all, b, b"written via b"))
    emit(C, S, "content-a", content(a))
    emit(C, S, "append-through-a", call(write_all, a, b"+a", os.O_WRONLY | os.O_APPEND))
    emit(C, S, "content-b", content(b))
    emit(C, S, "truncate-a", call(os.truncate, a, 4))
    emit(C, S, "size-b", describe(b))
    emit(C, S, "chmod-b", call(os.chmod, b, 0o600))
    emit(C, S, "perm-a", perm(a))
    emit(C, S, "chown-a", call(os.chown, a, NOBODY, NOGROUP))
    emit(C, S, "ids-b", ids(b))
    emit(C, S, "utime-a", call(os.utime, a, ns=(1500000000000000000, 1500000000000000000)))
    emit(C, S, "mtime-b-is-set", mtime_is(b, 1500000000000))
    # two descriptors, one through each name: a write through one is read through the other at once
    fa = call(os.open, a, os.O_RDWR)
    fb = call(os.open, b, os.O_RDONLY)
    emit(C, S, "open-both", [isinstance(fa, int), isinstance(fb, int)])
    if isinstance(fa, int) and isinstance(fb, int):
        emit(C, S, "pwrite-a", call(os.pwrite, fa, b"ZZ", 0))
        emit(C, S, "pread-b-before-close", call(lambda: os.pread(fb, 100, 0).decode("latin1")))
        emit(C, S, "fstat-b-size", call(lambda: os.fstat(fb).st_size))
    closing(fa)
    closing(fb)
    settle()  # once every cache has expired, both names show the same file
    emit(C, S, "content-b-after-close", content(b))
    emit(C, S, "unlink-a", call(os.unlink, a))
    emit(C, S, "content-b-after-unlink", content(b))
    emit(C, S, "perm-b-after-unlink", perm(b))

    # the errors
    d = fresh()
    a = d + "/a"
    put(a)
    put(d + "/other", b"other")
    os.mkdir(d + "/sub")
    S = "errors"
    emit(C, S, "dir", call(os.link, d + "/sub", d + "/sublink"))
    emit(C, S, "dir-into-itself", call(os.link, d + "/sub", d + "/sub/x"))
    emit(C, S, "onto-existing-file", call(os.link, a, d + "/other"))
    emit(C, S, "other-unchanged", content(d + "/other"))
    emit(C, S, "onto-existing-dir", call(os.link, a, d + "/sub"))
    emit(C, S, "missing-parent", call(os.link, a, d + "/nodir/x"))
    emit(C, S, "source-under-file", call(os.link, a + "/x", d + "/y"))
    emit(C, S, "target-under-file", call(os.link, a, d + "/other/y"))
    emit(C, S, "trailing-slash-source", call(os.link, a + "/", d + "/z"))
    emit(C, S, "nlink-after-errors", nlink(a))
    emit(C, S, "listing", listing(d))

    # rename of one name over another name of the same file: nothing happens (POSIX)
    d = fresh()
    a, b = d + "/a", d + "/b"
    put(a, b"same")
    S = "rename-same-inode"
    emit(C, S, "link", call(os.link, a, b))
    # listed just before each rename: a mount that holds a listing keeps it true too
    emit(C, S, "listing-before", listing(d))
    emit(C, S, "rename-a-over-b", call(os.rename, a, b))
    emit(C, S, "listing", listing(d))
    emit(C, S, "nlink-a", nlink(a))
    emit(C, S, "nlink-b", nlink(b))
    emit(C, S, "content-a", content(a))
    emit(C, S, "listing-before-2", listing(d))
    emit(C, S, "rename-b-over-a", call(os.rename, b, a))
    emit(C, S, "listing-after", listing(d))
    emit(C, S, "rename-a-to-c", call(os.rename, a, d + "/c"))
    emit(C, S, "listing-renamed", listing(d))
    emit(C, S, "same-inode-b-c", same_inode(b, d + "/c"))
    emit(C, S, "nlink-c", nlink(d + "/c"))

    # times: link changes the source's ctime (not its mtime) and its parent's mtime; each
    # comparison on a file (and in a directory) of its own, after the caches settled
    d = fresh()
    S = "times"
    for n in ("ctime", "mtime", "parent", "unlink", "failed"):
        os.mkdir(d + "/" + n)
        put(d + "/" + n + "/a")
    emit(C, S, "prep-link", call(os.link, d + "/unlink/a", d + "/unlink/b"))
    put(d + "/failed/c")
    settle()
    r, m = moved(d + "/ctime/a", lambda: os.link(d + "/ctime/a", d + "/ctime/b"))
    emit(C, S, "link", r)
    emit(C, S, "source-ctime-moved", m)
    r, m = moved(d + "/mtime/a", lambda: os.link(d + "/mtime/a", d + "/mtime/b"), mtime_ns)
    emit(C, S, "source-mtime-moved", m)
    r, m = moved(d + "/parent", lambda: os.link(d + "/parent/a", d + "/parent/b"), mtime_ns)
    emit(C, S, "parent-mtime-moved", m)
    r, m = moved(d + "/unlink/a", lambda: os.unlink(d + "/unlink/b"))
    emit(C, S, "unlink-other-name", r)
    emit(C, S, "unlink-ctime-moved", m)
    r, m = moved(d + "/failed/a", lambda: os.link(d + "/failed/a", d + "/failed/c"))
    emit(C, S, "failed-link", r)
    emit(C, S, "failed-link-ctime-moved", m)

    # names in different directories
    d = fresh()
    a = d + "/a"
    put(a, b"across")
    os.mkdir(d + "/sub")
    S = "across-dirs"
    emit(C, S, "link", call(os.link, a, d + "/sub/a"))
    emit(C, S, "nlink", nlink(d + "/sub/a"))
    emit(C, S, "rename-dir", call(os.rename, d + "/sub", d + "/sub2"))
    emit(C, S, "content-through-renamed-dir", content(d + "/sub2/a"))
    emit(C, S, "same-inode", same_inode(a, d + "/sub2/a"))
    emit(C, S, "unlink-first", call(os.unlink, a))
    emit(C, S, "content-left", content(d + "/sub2/a"))
    emit(C, S, "nlink-left", nlink(d + "/sub2/a"))
    emit(C, S, "rmdir-full", call(os.rmdir, d + "/sub2"))

    # a hard link to a symlink (linkat without AT_SYMLINK_FOLLOW), and to its target (with)
    d = fresh()
    put(d + "/a", b"x")
    S = "symlink"
    emit(C, S, "symlink", call(os.symlink, "a", d + "/s"))
    emit(C, S, "link-nofollow", call(os.link, d + "/s", d + "/hs", follow_symlinks=False))
    emit(C, S, "hs-lstat", lsdesc(d + "/hs"))
    emit(C, S, "hs-readlink", call(os.readlink, d + "/hs"))
    emit(C, S, "s-nlink", nlink(d + "/s"))
    emit(C, S, "link-follow", call(linkat_follow, d + "/s", d + "/hf"))
    emit(C, S, "hf-lstat", lsdesc(d + "/hf"))
    emit(C, S, "hf-same-as-target", same_inode(d + "/a", d + "/hf"))
    emit(C, S, "a-nlink", nlink(d + "/a"))


def seq_symlink():
    d = fresh()
    put(d + "/f", b"x")
    emit("symlink", "file", "symlink", call(os.symlink, "f", d + "/s"))
    emit("symlink", "file", "lstat", describe(d + "/s"))
    emit("symlink", "file", "readlink", call(os.readlink, d + "/s"))
    emit("symlink", "dangling", "symlink", call(os.symlink, "nowhere", d + "/t"))
    emit("symlink", "existing", "symlink", call(os.symlink, "f", d + "/f"))
    emit("symlink", "readlink-regular", "readlink", call(os.readlink, d + "/f"))
    emit("symlink", "readlink-missing", "readlink", call(os.readlink, d + "/nope"))
    emit("symlink", "mkfifo", "mkfifo", call(os.mkfifo, d + "/fifo"))
    emit("symlink", "listing", "after", listing(d))

    C = "symlink"
    # a relative link to a file: what lstat, stat, readlink, open and chmod see
    d = fresh()
    f, s = d + "/f", d + "/s"
    put(f, b"target content")
    S = "relative"
    emit(C, S, "symlink", call(os.symlink, "f", s))
    emit(C, S, "lstat", lsdesc(s))
    emit(C, S, "lstat-perm", perm(s))
    emit(C, S, "lstat-nlink", nlink(s))
    emit(C, S, "stat", sdesc(s))
    emit(C, S, "readlink", call(os.readlink, s))
    emit(C, S, "read-through", content(s))
    emit(C, S, "write-through", call(write_all, s, b"via link"))
    emit(C, S, "target-content", content(f))
    emit(C, S, "chmod-through", call(os.chmod, s, 0o600))
    emit(C, S, "target-perm", perm(f))
    emit(C, S, "link-perm", perm(s))
    emit(C, S, "chown-through", call(os.chown, s, NOBODY, NOGROUP))
    emit(C, S, "target-ids", ids(f))
    emit(C, S, "link-ids", ids(s))
    emit(C, S, "lchown", call(os.lchown, s, DAEMON, DAEMON))
    emit(C, S, "link-ids-after-lchown", ids(s))
    emit(C, S, "target-ids-after-lchown", ids(f))
    emit(C, S, "utime-through", call(os.utime, s, ns=(1500000000000000000, 1500000000000000000)))
    emit(C, S, "target-mtime-is-set", mtime_is(f, 1500000000000))
    emit(C, S, "utime-nofollow", call(os.utime, s, ns=(1400000000000000000, 1400000000000000000), follow_symlinks=False))
    emit(C, S, "link-mtime-is-set", mtime_is(s, 1400000000000))
    emit(C, S, "target-mtime-kept", mtime_is(f, 1500000000000))
    emit(C, S, "truncate-through", call(os.truncate, s, 3))
    emit(C, S, "target-size", describe(f))
    emit(C, S, "nofollow-open", fd_ok(s, os.O_RDONLY | os.O_NOFOLLOW))
    emit(C, S, "nofollow-creat", fd_ok(s, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW))
    emit(C, S, "excl-creat", fd_ok(s, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    emit(C, S, "trailing-slash", sdesc(s + "/"))
    emit(C, S, "scandir-type", call(lambda: sorted("%s:%s:%s" % (e.name, e.is_symlink(), e.is_file()) for e in os.scandir(d))))
    # rename and unlink of the link leave the target alone
    emit(C, S, "rename-link", call(os.rename, s, d + "/s2"))
    emit(C, S, "readlink-renamed", call(os.readlink, d + "/s2"))
    emit(C, S, "target-after-rename", content(f))
    emit(C, S, "unlink-link", call(os.unlink, d + "/s2"))
    emit(C, S, "target-after-unlink", content(f))
    emit(C, S, "listing", listing(d))

    # an absolute target (the run's directory differs between runs: compare with what was given)
    d = fresh()
    put(d + "/f", b"abs")
    S = "absolute"
    emit(C, S, "symlink", call(os.symlink, d + "/f", d + "/a"))
    emit(C, S, "readlink-is-target", call(lambda: os.readlink(d + "/a") == d + "/f"))
    emit(C, S, "lstat-size-is-length", call(lambda: os.lstat(d + "/a").st_size == len((d + "/f").encode())))
    emit(C, S, "read-through", content(d + "/a"))
    emit(C, S, "root", call(os.symlink, "/", d + "/r"))
    emit(C, S, "list-root-through", call(lambda: sorted(os.listdir(d + "/r/")) == sorted(os.listdir("/"))))
    os.mkdir(d + "/sub")
    emit(C, S, "rename-target-away", call(os.rename, d + "/f", d + "/sub/f"))
    emit(C, S, "now-dangling", sdesc(d + "/a"))
    emit(C, S, "dotdot", call(os.symlink, "../f", d + "/sub/up"))
    emit(C, S, "rename-target-back", call(os.rename, d + "/sub/f", d + "/f"))
    emit(C, S, "dotdot-read", content(d + "/sub/up"))

    # readlink returns the target's exact bytes, whatever they are
    d = fresh()
    S = "exact-bytes"
    targets = [b"f", b"./f", b"sub/../f", b"a//b", b"f/", b"/", b"..", b" spaced name ", "\u00fcn\u00efcode\u2713".encode(),
               b"new\nline", b"\xff\xfe not utf-8", b"back\\slash", b"*?[glob]", b"-dash"]
    for i, target in enumerate(targets):
        p = ("%s/l%02d" % (d, i)).encode()
        emit(C, S, "symlink-%02d" % i, call(os.symlink, target, p))
        emit(C, S, "readlink-%02d" % i, call(lambda: os.readlink(p).decode("utf-8", "backslashreplace")))
        emit(C, S, "size-%02d" % i, call(lambda: os.lstat(p).st_size == len(target)))
    emit(C, S, "listing", listing(d))

    # dangling: stat and open fail, O_CREAT makes the target, O_EXCL does not
    d = fresh()
    S = "dangling-link"
    emit(C, S, "symlink", call(os.symlink, "nowhere", d + "/t"))
    emit(C, S, "lstat", lsdesc(d + "/t"))
    emit(C, S, "stat", sdesc(d + "/t"))
    emit(C, S, "open", fd_ok(d + "/t", os.O_RDONLY))
    emit(C, S, "exists", os.path.exists(d + "/t"))
    emit(C, S, "lexists", os.path.lexists(d + "/t"))
    emit(C, S, "creat-excl", fd_ok(d + "/t", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    emit(C, S, "creat", fd_ok(d + "/t", os.O_WRONLY | os.O_CREAT))
    emit(C, S, "target-made", describe(d + "/nowhere"))
    emit(C, S, "stat-now", sdesc(d + "/t"))
    emit(C, S, "into-missing-dir", call(os.symlink, "nodir/x", d + "/u"))
    emit(C, S, "creat-into-missing-dir", fd_ok(d + "/u", os.O_WRONLY | os.O_CREAT))
    emit(C, S, "listing", listing(d))

    # a link to a directory: listing through it, making files through it; rmdir refuses it
    d = fresh()
    os.mkdir(d + "/sub")
    put(d + "/sub/x", b"in sub")
    S = "to-dir"
    emit(C, S, "symlink", call(os.symlink, "sub", d + "/sl"))
    emit(C, S, "lstat", lsdesc(d + "/sl"))
    emit(C, S, "stat", sdesc(d + "/sl"))
    emit(C, S, "list-through", listing(d + "/sl"))
    emit(C, S, "list-through-slash", listing(d + "/sl/"))
    emit(C, S, "read-through", content(d + "/sl/x"))
    emit(C, S, "create-through", call(put, d + "/sl/new", b"made via link"))
    emit(C, S, "created-in-target", content(d + "/sub/new"))
    emit(C, S, "mkdir-through", call(os.mkdir, d + "/sl/deeper"))
    emit(C, S, "nested-symlink", call(os.symlink, "../x", d + "/sl/deeper/back"))
    emit(C, S, "read-nested", content(d + "/sl/deeper/back"))
    emit(C, S, "opendir-nofollow", fd_ok(d + "/sl", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW))
    emit(C, S, "rmdir-link", call(os.rmdir, d + "/sl"))
    emit(C, S, "rmdir-link-slash", call(os.rmdir, d + "/sl/"))
    emit(C, S, "walk-no-follow", call(lambda: sorted(os.path.relpath(os.path.join(b, n), d) for b, ds, fs in os.walk(d) for n in ds + fs)))
    emit(C, S, "unlink-link", call(os.unlink, d + "/sl"))
    emit(C, S, "target-kept", listing(d + "/sub"))

    # loops
    d = fresh()
    S = "loop"
    emit(C, S, "l1", call(os.symlink, "l2", d + "/l1"))
    emit(C, S, "l2", call(os.symlink, "l1", d + "/l2"))
    emit(C, S, "self", call(os.symlink, "self", d + "/self"))
    emit(C, S, "open", fd_ok(d + "/l1", os.O_RDONLY))
    emit(C, S, "open-creat", fd_ok(d + "/l1", os.O_WRONLY | os.O_CREAT))
    emit(C, S, "stat", sdesc(d + "/l1"))
    emit(C, S, "stat-self", sdesc(d + "/self"))
    emit(C, S, "lstat", lsdesc(d + "/self"))
    emit(C, S, "under", sdesc(d + "/l1/x"))
    emit(C, S, "mkdir-under", call(os.mkdir, d + "/self/x"))
    emit(C, S, "chmod", call(os.chmod, d + "/l1", 0o600))
    emit(C, S, "nofollow", fd_ok(d + "/self", os.O_RDONLY | os.O_NOFOLLOW))
    # a chain of 40 links resolves (the kernel's limit); 41 do not
    def chain():
        for i in range(41):
            os.symlink("c%02d" % (i + 1), "%s/c%02d" % (d, i))
    emit(C, S, "chain-setup", call(chain))
    put(d + "/c41", b"end of chain")
    emit(C, S, "chain-40", content(d + "/c01"))
    emit(C, S, "chain-41", content(d + "/c00"))
    emit(C, S, "count", call(lambda: len(os.listdir(d))))

    # long targets: 1000 bytes, 4095 (PATH_MAX - 1) bytes, 4096 (too long)
    d = fresh()
    S = "long-target"
    for n in (255, 256, 1000, 4095):
        t = ("x/" * n)[:n]
        emit(C, S, "symlink-%d" % n, call(os.symlink, t, "%s/t%d" % (d, n)))
        emit(C, S, "readlink-%d" % n, call(lambda: os.readlink("%s/t%d" % (d, n)) == t))
        emit(C, S, "lstat-%d" % n, lsdesc("%s/t%d" % (d, n)))
    emit(C, S, "symlink-4096", call(os.symlink, "y" * 4096, d + "/t4096"))
    emit(C, S, "listing", listing(d))

    # the errors
    d = fresh()
    put(d + "/f")
    os.mkdir(d + "/dir")
    S = "errors"
    emit(C, S, "over-dir", call(os.symlink, "f", d + "/dir"))
    emit(C, S, "over-symlink", call(lambda: (os.symlink("f", d + "/s"), os.symlink("g", d + "/s"))))
    emit(C, S, "readlink-kept", call(os.readlink, d + "/s"))
    emit(C, S, "missing-parent", call(os.symlink, "f", d + "/nodir/s"))
    emit(C, S, "parent-is-file", call(os.symlink, "f", d + "/f/s"))
    emit(C, S, "empty-target", call(os.symlink, "", d + "/e"))
    emit(C, S, "readlink-dir", call(os.readlink, d + "/dir"))
    emit(C, S, "readlink-trailing-slash", call(os.readlink, d + "/s/"))
    emit(C, S, "listing", listing(d))


# ---------------------------------------------------------------- chmod

def seq_chmod():
    d = fresh()
    put(d + "/f")
    os.mkdir(d + "/dir")
    perm = lambda p: call(lambda: "%o" % stat.S_IMODE(os.stat(p).st_mode))
    for mode in (0o600, 0o755, 0o400, 0o644):
        emit("chmod", "file-%o" % mode, "chmod", call(os.chmod, d + "/f", mode))
        emit("chmod", "file-%o" % mode, "perm", perm(d + "/f"))
    emit("chmod", "dir-700", "chmod", call(os.chmod, d + "/dir", 0o700))
    emit("chmod", "dir-700", "perm", perm(d + "/dir"))
    emit("chmod", "missing", "chmod", call(os.chmod, d + "/nope", 0o600))
    fd = os.open(d + "/f", os.O_RDONLY)
    emit("chmod", "fchmod", "fchmod", call(os.fchmod, fd, 0o640))
    os.close(fd)
    emit("chmod", "fchmod", "perm", perm(d + "/f"))
    emit("chmod", "type-kept", "stat", describe(d + "/f"))


# ---------------------------------------------------------------- utimensat

_libc = ctypes.CDLL(None, use_errno=True)
UTIME_OMIT = (1 << 30) - 2
AT_FDCWD = -100


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def linkat_follow(src, dst):
    """linkat(2) with AT_SYMLINK_FOLLOW: a link to what src names (Python's os.link never follows)."""
    if _libc.linkat(AT_FDCWD, src.encode(), AT_FDCWD, dst.encode(), 0x400) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return None


def utimensat(path, atime, mtime):
    """utimensat(2) with (sec, nsec) pairs; nsec may be UTIME_OMIT."""
    times = (Timespec * 2)(Timespec(*atime), Timespec(*mtime))
    if _libc.utimensat(AT_FDCWD, path.encode(), times, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return None


def seq_utimensat():
    d = fresh()
    p = d + "/f"
    put(p)
    times = lambda: call(lambda: "a=%d m=%d" % (os.stat(p).st_atime_ns // 1000000, os.stat(p).st_mtime_ns // 1000000))
    emit("utimensat", "both", "utime", call(os.utime, p, ns=(1500000000123000000, 1600000000456000000)))
    emit("utimensat", "both", "times", times())
    emit("utimensat", "same", "utime", call(os.utime, p, ns=(1700000000000000000, 1700000000000000000)))
    emit("utimensat", "same", "times", times())
    emit("utimensat", "mtime-only", "utimensat", call(utimensat, p, (0, UTIME_OMIT), (1650000000, 0)))
    emit("utimensat", "mtime-only", "times", times())
    emit("utimensat", "atime-only", "utimensat", call(utimensat, p, (1660000000, 0), (0, UTIME_OMIT)))
    emit("utimensat", "atime-only", "times", times())
    emit("utimensat", "now", "utime", call(os.utime, p, None))
    emit("utimensat", "now", "recent", call(lambda: abs(os.stat(p).st_mtime - time.time()) < 30))
    emit("utimensat", "missing", "utime", call(os.utime, d + "/nope", ns=(0, 0)))
    emit("utimensat", "dir", "utime", call(os.utime, d, ns=(1500000000000000000, 1500000000000000000)))
    emit("utimensat", "dir", "mtime", call(lambda: os.stat(d).st_mtime_ns // 1000000))
    # a write after utime sets mtime to now again
    os.utime(p, ns=(1500000000000000000, 1500000000000000000))
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"more")
    os.close(fd)
    emit("utimensat", "write-after", "recent", call(lambda: abs(os.stat(p).st_mtime - time.time()) < 30))


# ---------------------------------------------------------------- stat

def seq_stat():
    d = fresh()
    p = d + "/f"
    put(p, b"x" * 5000)
    st = os.stat(p)
    emit("stat", "file", "type", kind(st.st_mode))
    emit("stat", "file", "size", st.st_size)
    emit("stat", "file", "nlink", st.st_nlink)
    emit("stat", "file", "perm", "%o" % stat.S_IMODE(st.st_mode))
    emit("stat", "file", "uid", st.st_uid == os.getuid())
    emit("stat", "file", "blocks-cover-size", st.st_blocks * 512 >= st.st_size)
    emit("stat", "file", "mtime-recent", abs(st.st_mtime - time.time()) < 30)
    put(d + "/empty", b"")
    emit("stat", "empty", "size", describe(d + "/empty"))
    put(d + "/utf", "héllo wörld ✓".encode())
    emit("stat", "utf8", "size", describe(d + "/utf"))
    put(d + "/bin", bytes([0, 255, 128, 10, 13, 0]))
    emit("stat", "binary", "size", describe(d + "/bin"))
    os.mkdir(d + "/dir")
    emit("stat", "dir", "type", call(lambda: kind(os.stat(d + "/dir").st_mode)))
    emit("stat", "dir", "perm", call(lambda: "%o" % stat.S_IMODE(os.stat(d + "/dir").st_mode)))
    emit("stat", "missing", "stat", describe(d + "/nope"))
    emit("stat", "under-file", "stat", describe(p + "/x"))
    emit("stat", "trailing-slash-file", "stat", describe(p + "/"))
    emit("stat", "access", "R_OK", call(os.access, p, os.R_OK))
    emit("stat", "access", "X_OK", call(os.access, p, os.X_OK))
    emit("stat", "access", "missing", call(os.access, d + "/nope", os.F_OK))
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"yy")
    emit("stat", "open-write", "fstat", call(lambda: os.fstat(fd).st_size))
    emit("stat", "open-write", "stat-before-close", describe(p))
    os.close(fd)
    emit("stat", "open-write", "after-close", describe(p))


# ---------------------------------------------------------------- readdir

def seq_readdir():
    d = fresh()
    for n in ["b.txt", "a.txt", ".hidden", "space name", "ünïcode"]:
        put(os.path.join(d, n))
    os.mkdir(d + "/sub")
    os.mkdir(d + "/sub/deeper")
    put(d + "/sub/x")
    emit("readdir", "flat", "names", listing(d))
    emit("readdir", "flat", "types", call(lambda: sorted("%s:%s" % (e.name, "dir" if e.is_dir(follow_symlinks=False) else "file") for e in os.scandir(d))))
    emit("readdir", "sub", "names", listing(d + "/sub"))
    emit("readdir", "empty", "names", listing(d + "/sub/deeper"))
    emit("readdir", "missing", "names", listing(d + "/nope"))
    emit("readdir", "file", "names", listing(d + "/a.txt"))
    os.unlink(d + "/a.txt")
    os.rename(d + "/b.txt", d + "/c.txt")
    emit("readdir", "after-changes", "names", listing(d))
    emit("readdir", "walk", "tree", call(lambda: sorted(os.path.relpath(os.path.join(b, n), d) for b, ds, fs in os.walk(d) for n in ds + fs)))
    many = fresh()
    for i in range(100):
        put(os.path.join(many, "f%03d" % i), b"")
    emit("readdir", "100-entries", "count", call(lambda: len(os.listdir(many))))


# ---------------------------------------------------------------- owners

def seq_owners():
    C = "owners"
    d = fresh()
    # another user reaches the run's directories at all (every level is 0755): the rest means something
    emit_all(C, "reach", as_user(lambda: [["list-as-nobody", listing(d)], ["uid", os.getuid()], ["groups", sorted(os.getgroups())]]))

    # root gives files away, and takes them back
    S = "root-chown"
    f = d + "/f"
    put(f)
    os.mkdir(d + "/dir")
    emit(C, S, "initial", ids(f))
    emit(C, S, "chown-uid", call(os.chown, f, NOBODY, -1))
    emit(C, S, "after-uid", ids(f))
    emit(C, S, "chgrp", call(os.chown, f, -1, NOGROUP))
    emit(C, S, "after-gid", ids(f))
    emit(C, S, "chown-both", call(os.chown, f, DAEMON, DAEMON))
    emit(C, S, "after-both", ids(f))
    emit(C, S, "lchown", call(os.lchown, f, NOBODY, DAEMON))
    emit(C, S, "after-lchown", ids(f))
    fd = os.open(f, os.O_RDONLY)
    emit(C, S, "fchown", call(os.fchown, fd, 0, NOGROUP))
    emit(C, S, "fstat-ids", call(lambda: "%d:%d" % (os.fstat(fd).st_uid, os.fstat(fd).st_gid)))
    os.close(fd)
    emit(C, S, "after-fchown", ids(f))
    emit(C, S, "noop", call(os.chown, f, -1, -1))
    emit(C, S, "after-noop", ids(f))
    emit(C, S, "back-to-root", call(os.chown, f, 0, 0))
    emit(C, S, "after-back", ids(f))
    emit(C, S, "dir", call(os.chown, d + "/dir", NOBODY, NOGROUP))
    emit(C, S, "dir-ids", ids(d + "/dir"))
    emit(C, S, "missing", call(os.chown, d + "/nope", 0, 0))
    emit(C, S, "perm-kept", perm(f))
    emit(C, S, "content-kept", content(f))
    emit(C, S, "listing-ids", call(lambda: sorted("%s=%s" % (n, ids(os.path.join(d, n))) for n in os.listdir(d))))

    # chown clears setuid, and setgid when the group may execute, of a regular file (root too);
    # a directory keeps its bits
    for name, mode, uid, gid in [("6755", 0o6755, NOBODY, NOGROUP), ("4755", 0o4755, NOBODY, -1), ("2755", 0o2755, -1, NOGROUP),
                                 ("2745", 0o2745, NOBODY, NOGROUP), ("6755-same-owner", 0o6755, 0, 0), ("6755-noop", 0o6755, -1, -1)]:
        S = "clear-" + name
        p = d + "/k" + name
        put(p)
        emit(C, S, "chmod", call(os.chmod, p, mode))
        emit(C, S, "before", perm(p))
        emit(C, S, "chown", call(os.chown, p, uid, gid))
        emit(C, S, "after", perm(p))
        emit(C, S, "ids", ids(p))
    S = "clear-dir"
    os.mkdir(d + "/sdir")
    emit(C, S, "chmod", call(os.chmod, d + "/sdir", 0o6755))
    emit(C, S, "chown", call(os.chown, d + "/sdir", NOBODY, NOGROUP))
    emit(C, S, "after", perm(d + "/sdir"))

    # as another user: nobody (65534:65534) next to root's files
    d = fresh()
    ro, rw, priv, grp = d + "/ro", d + "/rw", d + "/priv", d + "/grp"
    for p, m in ((ro, 0o755), (rw, 0o777), (priv, 0o700), (grp, 0o775)):
        os.mkdir(p)
        os.chmod(p, m)
    put(ro + "/f")
    put(priv + "/x")
    for n, m in (("f600", 0o600), ("f644", 0o644), ("f666", 0o666), ("f6777", 0o6777), ("t6777", 0o6777)):
        put(d + "/" + n)
        os.chmod(d + "/" + n, m)
    put(rw + "/rootfile")
    theirs = rw + "/theirs"
    put(theirs)
    S = "as-nobody"
    emit(C, S, "prep-chown-theirs", call(os.chown, theirs, NOBODY, 0))
    emit(C, S, "prep-chgrp-grp", call(os.chown, grp, 0, DAEMON))

    def nobody():
        s = Steps()
        s.add("create-in-ro", fd_ok(ro + "/new", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        s.add("mkdir-in-ro", call(os.mkdir, ro + "/sub"))
        s.add("create-in-group-dir-not-member", fd_ok(grp + "/new", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        s.add("create-in-rw", fd_ok(rw + "/mine", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        s.add("mine-ids", ids(rw + "/mine"))
        s.add("mine-perm", perm(rw + "/mine"))
        s.add("mkdir-in-rw", call(os.mkdir, rw + "/mydir"))
        s.add("mydir-ids", ids(rw + "/mydir"))
        s.add("create-in-mydir", fd_ok(rw + "/mydir/x", os.O_WRONLY | os.O_CREAT))
        s.add("write-mine", call(write_all, rw + "/mine", b"mine"))
        s.add("read-mine", content(rw + "/mine"))
        s.add("chmod-mine", call(os.chmod, rw + "/mine", 0o600))
        s.add("mine-perm-after", perm(rw + "/mine"))
        s.add("read-mine-600", content(rw + "/mine"))
        s.add("chmod-mine-000", call(os.chmod, rw + "/mine", 0o000))
        s.add("read-mine-000", content(rw + "/mine"))
        s.add("chmod-mine-back", call(os.chmod, rw + "/mine", 0o644))
        for n in ("f600", "f644", "f666"):
            p = d + "/" + n
            s.add(n + "-rdonly", fd_ok(p, os.O_RDONLY))
            s.add(n + "-wronly", fd_ok(p, os.O_WRONLY))
            s.add(n + "-rdwr", fd_ok(p, os.O_RDWR))
            s.add(n + "-trunc", fd_ok(p, os.O_WRONLY | os.O_TRUNC))
            s.add(n + "-read", content(p))
            s.add(n + "-access-R", call(os.access, p, os.R_OK))
            s.add(n + "-access-W", call(os.access, p, os.W_OK))
            s.add(n + "-truncate", call(os.truncate, p, 3))
        s.add("f666-append", call(write_all, d + "/f666", b" by nobody", os.O_WRONLY | os.O_APPEND))
        s.add("f666-content", content(d + "/f666"))
        s.add("f6777-append", call(write_all, d + "/f6777", b"!", os.O_WRONLY | os.O_APPEND))
        s.add("t6777-truncate", call(os.truncate, d + "/t6777", 1))
        s.add("chmod-not-owner", call(os.chmod, d + "/f644", 0o666))
        s.add("chown-not-owner", call(os.chown, d + "/f644", NOBODY, NOGROUP))
        s.add("chgrp-not-owner", call(os.chown, d + "/f644", -1, NOGROUP))
        s.add("chown-mine-to-other", call(os.chown, rw + "/mine", DAEMON, -1))
        s.add("chown-mine-to-root", call(os.chown, rw + "/mine", 0, -1))
        s.add("chgrp-mine-not-member", call(os.chown, rw + "/mine", -1, DAEMON))
        s.add("chgrp-mine-own-group", call(os.chown, rw + "/mine", -1, NOGROUP))
        s.add("chown-mine-to-self", call(os.chown, rw + "/mine", NOBODY, -1))
        s.add("mine-ids-after", ids(rw + "/mine"))
        s.add("chgrp-theirs-to-own-group", call(os.chown, theirs, -1, NOGROUP))
        s.add("theirs-ids", ids(theirs))
        s.add("utime-times-644", call(os.utime, d + "/f644", ns=(10 ** 18, 10 ** 18)))
        s.add("utime-times-666", call(os.utime, d + "/f666", ns=(10 ** 18, 10 ** 18)))
        s.add("utime-now-666", call(os.utime, d + "/f666", None))
        s.add("utime-now-644", call(os.utime, d + "/f644", None))
        s.add("utime-times-mine", call(os.utime, rw + "/mine", ns=(1500000000000000000, 1500000000000000000)))
        s.add("mine-mtime-is-set", mtime_is(rw + "/mine", 1500000000000))
        s.add("unlink-in-ro", call(os.unlink, ro + "/f"))
        s.add("rename-in-ro", call(os.rename, ro + "/f", ro + "/g"))
        s.add("rename-out-of-ro", call(os.rename, ro + "/f", rw + "/g"))
        s.add("rename-into-ro", call(os.rename, rw + "/mine", ro + "/mine"))
        s.add("unlink-root-file-in-rw", call(os.unlink, rw + "/rootfile"))
        s.add("stat-in-priv", describe(priv + "/x"))
        s.add("list-priv", listing(priv))
        s.add("create-in-priv", fd_ok(priv + "/y", os.O_WRONLY | os.O_CREAT))
        s.add("list-ro", listing(ro))
        s.add("chmod-dir-not-owner", call(os.chmod, ro, 0o777))
        s.add("rmdir-mydir-full", call(os.rmdir, rw + "/mydir"))
        s.add("unlink-in-mydir", call(os.unlink, rw + "/mydir/x"))
        s.add("rmdir-mydir", call(os.rmdir, rw + "/mydir"))
        return s
    emit_all(C, S, as_user(nobody))
    S = "as-nobody-seen-by-root"
    for n in ("f600", "f644", "f666"):
        emit(C, S, n, describe(d + "/" + n))
    emit(C, S, "f666-content", content(d + "/f666"))
    emit(C, S, "f644-mtime-now", call(lambda: abs(os.stat(d + "/f644").st_mtime - time.time()) < 30))
    emit(C, S, "f6777-perm", perm(d + "/f6777"))
    emit(C, S, "t6777-perm", perm(d + "/t6777"))
    emit(C, S, "rw", call(lambda: sorted("%s=%s" % (n, ids(os.path.join(rw, n))) for n in os.listdir(rw))))
    emit(C, S, "ro", listing(ro))

    # with a supplementary group: nobody in daemon's group too
    S = "as-nobody-with-daemon-group"

    def member():
        s = Steps()
        s.add("groups", sorted(os.getgroups()))
        s.add("create-in-group-dir", fd_ok(grp + "/new", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        s.add("new-ids", ids(grp + "/new"))
        s.add("chgrp-supplementary", call(os.chown, grp + "/new", -1, DAEMON))
        s.add("after-supplementary", ids(grp + "/new"))
        s.add("chgrp-primary", call(os.chown, grp + "/new", -1, NOGROUP))
        s.add("after-primary", ids(grp + "/new"))
        s.add("chgrp-root-group", call(os.chown, grp + "/new", -1, 0))
        s.add("unlink-new", call(os.unlink, grp + "/new"))
        return s
    emit_all(C, S, as_user(member, groups=[NOGROUP, DAEMON]))
    emit(C, S, "listing", listing(grp))


# ---------------------------------------------------------------- sticky-setgid

def seq_sticky_setgid():
    C = "sticky-setgid"
    d = fresh()
    t = d + "/t"
    os.mkdir(t)
    S = "sticky"
    emit(C, S, "chmod", call(os.chmod, t, 0o1777))
    emit(C, S, "perm", perm(t))
    put(t + "/rootf")
    put(t + "/rootf2")
    os.mkdir(t + "/rootdir")
    os.chmod(t + "/rootf2", 0o666)

    def nobody():
        s = Steps()
        s.add("create", fd_ok(t + "/mine", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        s.add("unlink-root-file", call(os.unlink, t + "/rootf"))
        s.add("rename-root-file", call(os.rename, t + "/rootf", t + "/moved"))
        s.add("rename-root-file-out", call(os.rename, t + "/rootf", t + "/rootdir/x"))
        s.add("rename-mine-over-root-file", call(os.rename, t + "/mine", t + "/rootf2"))
        s.add("rmdir-root-dir", call(os.rmdir, t + "/rootdir"))
        s.add("write-root-file-666", call(write_all, t + "/rootf2", b"x"))
        s.add("truncate-root-file-666", call(os.truncate, t + "/rootf2", 0))
        s.add("rename-mine", call(os.rename, t + "/mine", t + "/mine2"))
        s.add("mkdir", call(os.mkdir, t + "/mydir"))
        s.add("rename-mydir", call(os.rename, t + "/mydir", t + "/mydir2"))
        s.add("rmdir-mine", call(os.rmdir, t + "/mydir2"))
        s.add("create-left", fd_ok(t + "/left", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        s.add("unlink-mine", call(os.unlink, t + "/mine2"))
        s.add("listing", listing(t))
        return s
    emit_all(C, "sticky-as-nobody", as_user(nobody))
    # another user (daemon) cannot remove nobody's file either; root can
    emit_all(C, "sticky-as-daemon", as_user(lambda: [["unlink-nobodys", call(os.unlink, t + "/left")],
                                                     ["rename-nobodys", call(os.rename, t + "/left", t + "/x")]], DAEMON, DAEMON))
    emit(C, "sticky-as-root", "unlink-nobodys", call(os.unlink, t + "/left"))
    emit(C, "sticky-as-root", "listing", listing(t))
    # the directory's owner removes anything in it
    u = d + "/u"
    os.mkdir(u)
    os.chmod(u, 0o1777)
    put(u + "/rootf")
    emit(C, "sticky-dir-owner", "prep-chown", call(os.chown, u, NOBODY, NOGROUP))
    emit_all(C, "sticky-dir-owner", as_user(lambda: [["unlink-root-file", call(os.unlink, u + "/rootf")]]))
    emit(C, "sticky-dir-owner", "listing", listing(u))

    # a setgid directory hands its group to what is made in it, and its bit to subdirectories
    S = "setgid-dir"
    g = d + "/g"
    os.mkdir(g)
    emit(C, S, "chgrp", call(os.chown, g, 0, NOGROUP))
    emit(C, S, "chmod", call(os.chmod, g, 0o2775))
    emit(C, S, "perm", perm(g))
    emit(C, S, "ids", ids(g))
    put(g + "/f")
    emit(C, S, "file-ids", ids(g + "/f"))
    emit(C, S, "file-perm", perm(g + "/f"))
    emit(C, S, "mkdir", call(os.mkdir, g + "/sub"))
    emit(C, S, "sub-ids", ids(g + "/sub"))
    emit(C, S, "sub-perm", perm(g + "/sub"))
    emit(C, S, "mkdir-700", call(os.mkdir, g + "/sub700", 0o700))
    emit(C, S, "sub700-perm", perm(g + "/sub700"))
    put(g + "/sub/f2")
    emit(C, S, "nested-file-ids", ids(g + "/sub/f2"))
    emit(C, S, "mkdir-nested", call(os.mkdir, g + "/sub/deeper"))
    emit(C, S, "nested-dir-ids", ids(g + "/sub/deeper"))
    emit(C, S, "nested-dir-perm", perm(g + "/sub/deeper"))
    put(d + "/outside")
    emit(C, S, "rename-in", call(os.rename, d + "/outside", g + "/outside"))
    emit(C, S, "renamed-keeps-group", ids(g + "/outside"))
    emit(C, S, "mkfifo", call(os.mkfifo, g + "/fifo"))
    emit(C, S, "fifo-ids", ids(g + "/fifo"))
    emit(C, S, "symlink", call(os.symlink, "f", g + "/sl"))
    emit(C, S, "symlink-ids", ids(g + "/sl"))

    def nobody_in_g():
        s = Steps()
        s.add("create", fd_ok(g + "/nb", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        s.add("create-ids", ids(g + "/nb"))
        s.add("mkdir", call(os.mkdir, g + "/nbdir"))
        s.add("mkdir-ids", ids(g + "/nbdir"))
        s.add("mkdir-perm", perm(g + "/nbdir"))
        return s
    emit_all(C, "setgid-dir-as-nobody", as_user(nobody_in_g))
    # root's own group is not nogroup: the same in a setgid directory owned by root:daemon, made by nobody
    h = d + "/h"
    os.mkdir(h)
    os.chmod(h, 0o777)
    emit(C, "setgid-dir-other-group", "chgrp", call(os.chown, h, 0, DAEMON))
    emit(C, "setgid-dir-other-group", "chmod", call(os.chmod, h, 0o2777))

    def nobody_in_h():
        s = Steps()
        s.add("create", fd_ok(h + "/nb", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        s.add("create-ids", ids(h + "/nb"))
        s.add("mkdir", call(os.mkdir, h + "/nbdir"))
        s.add("mkdir-ids", ids(h + "/nbdir"))
        s.add("mkdir-perm", perm(h + "/nbdir"))
        return s
    emit_all(C, "setgid-dir-other-group", as_user(nobody_in_h))

    # chmod g+s by a non-root owner not in the file's group: the bit is dropped, without an error
    S = "chmod-setgid"
    for n, gid in (("not-member", DAEMON), ("member", NOGROUP)):
        put(d + "/" + n)
        emit(C, S, "prep-" + n, call(os.chown, d + "/" + n, NOBODY, gid))
        os.mkdir(d + "/dir-" + n)
        emit(C, S, "prep-dir-" + n, call(os.chown, d + "/dir-" + n, NOBODY, gid))

    def nobody_chmod():
        s = Steps()
        for n in ("not-member", "member"):
            s.add("chmod-" + n, call(os.chmod, d + "/" + n, 0o2755))
            s.add("perm-" + n, perm(d + "/" + n))
            s.add("chmod-dir-" + n, call(os.chmod, d + "/dir-" + n, 0o2755))
            s.add("perm-dir-" + n, perm(d + "/dir-" + n))
        s.add("chmod-setuid-own", call(os.chmod, d + "/not-member", 0o4755))
        s.add("perm-setuid-own", perm(d + "/not-member"))
        s.add("chmod-sticky-file", call(os.chmod, d + "/member", 0o1644))
        s.add("perm-sticky-file", perm(d + "/member"))
        return s
    emit_all(C, S, as_user(nobody_chmod))
    emit(C, S, "root-chmod-not-member", call(os.chmod, d + "/not-member", 0o2755))
    emit(C, S, "root-perm-not-member", perm(d + "/not-member"))


# ---------------------------------------------------------------- fifos (and sockets, devices)

def seq_fifos():
    C = "fifos"
    d = fresh()
    p = d + "/p"
    S = "mkfifo"
    old = os.umask(0o022)
    try:
        emit(C, S, "mkfifo", call(os.mkfifo, p, 0o666))
        emit(C, S, "mkfifo-640", call(os.mkfifo, d + "/q", 0o640))
    finally:
        os.umask(old)
    emit(C, S, "lstat", lsdesc(p))
    emit(C, S, "perm", perm(p))
    emit(C, S, "perm-640", perm(d + "/q"))
    emit(C, S, "nlink", nlink(p))
    emit(C, S, "ids", ids(p))
    emit(C, S, "existing", call(os.mkfifo, p))
    emit(C, S, "over-file", call(lambda: (put(d + "/f"), os.mkfifo(d + "/f"))))
    emit(C, S, "missing-parent", call(os.mkfifo, d + "/nodir/p"))
    emit(C, S, "scandir", call(lambda: sorted("%s:%s" % (e.name, ftype(e.stat(follow_symlinks=False).st_mode)) for e in os.scandir(d))))
    S = "io"
    # without a reader, a non-blocking writer is refused; with one, bytes pass
    emit(C, S, "write-no-reader", fd_ok(p, os.O_WRONLY | os.O_NONBLOCK))
    r = call(os.open, p, os.O_RDONLY | os.O_NONBLOCK)
    emit(C, S, "open-reader", "ok" if isinstance(r, int) else r)
    if isinstance(r, int):
        emit(C, S, "read-empty", call(lambda: os.read(r, 10).decode()))
        w = call(os.open, p, os.O_WRONLY | os.O_NONBLOCK)
        emit(C, S, "open-writer", "ok" if isinstance(w, int) else w)
        if isinstance(w, int):
            emit(C, S, "write", call(os.write, w, b"through the fifo"))
            emit(C, S, "fstat-writer", call(lambda: ftype(os.fstat(w).st_mode)))
            os.close(w)
        emit(C, S, "read", call(lambda: os.read(r, 100).decode()))
        emit(C, S, "read-eof", call(lambda: os.read(r, 100).decode()))
        os.close(r)
    emit(C, S, "rdwr", fd_ok(p, os.O_RDWR | os.O_NONBLOCK))
    emit(C, S, "size-after", lsdesc(p))
    S = "ops"
    emit(C, S, "chmod", call(os.chmod, p, 0o600))
    emit(C, S, "perm", perm(p))
    emit(C, S, "chown", call(os.chown, p, NOBODY, NOGROUP))
    emit(C, S, "ids", ids(p))
    emit(C, S, "utime", call(os.utime, p, ns=(1500000000000000000, 1500000000000000000)))
    emit(C, S, "mtime-is-set", mtime_is(p, 1500000000000))
    emit(C, S, "truncate", call(os.truncate, p, 0))
    emit(C, S, "rename", call(os.rename, p, d + "/p2"))
    emit(C, S, "renamed", lsdesc(d + "/p2"))
    emit(C, S, "link", call(os.link, d + "/p2", d + "/p3"))
    emit(C, S, "link-nlink", nlink(d + "/p2"))
    emit(C, S, "rename-over-file", call(os.rename, d + "/p3", d + "/f"))
    emit(C, S, "over-file-type", lsdesc(d + "/f"))
    emit(C, S, "unlink", call(os.unlink, d + "/p2"))
    emit(C, S, "rmdir", call(os.rmdir, d + "/f"))
    emit(C, S, "listing", listing(d))

    # a unix socket bound at a path is a socket in the directory, and one can connect to it
    d = fresh()
    S = "socket"
    sp = d + "/sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.settimeout(5)
    try:
        emit(C, S, "bind", call(srv.bind, sp))
        emit(C, S, "lstat", lsdesc(sp))
        emit(C, S, "perm", perm(sp))
        emit(C, S, "listen", call(srv.listen, 1))

        def connect():
            cl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            cl.settimeout(5)
            try:
                cl.connect(sp)
                conn, _ = srv.accept()
                with conn:
                    cl.sendall(b"over the socket")
                    return conn.recv(100).decode()
            finally:
                cl.close()
        emit(C, S, "connect-send-recv", call(connect))
        emit(C, S, "bind-again", call(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).bind(sp)))
        emit(C, S, "open", fd_ok(sp, os.O_RDONLY))
        emit(C, S, "rename", call(os.rename, sp, d + "/sock2"))
        emit(C, S, "renamed", lsdesc(d + "/sock2"))
        emit(C, S, "unlink", call(os.unlink, d + "/sock2"))
    finally:
        srv.close()
    dg = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        emit(C, S, "bind-dgram", call(dg.bind, d + "/dg"))
        emit(C, S, "dgram-lstat", lsdesc(d + "/dg"))

        def send():
            c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                c.sendto(b"datagram", d + "/dg")
            finally:
                c.close()
            dg.settimeout(5)
            return dg.recv(100).decode()
        emit(C, S, "dgram-sendto", call(send))
    finally:
        dg.close()
    emit(C, S, "listing", listing(d))

    # devices, as root: type and st_rdev; a regular file and a directory through mknod
    d = fresh()
    S = "mknod"
    emit(C, S, "char", call(os.mknod, d + "/null", stat.S_IFCHR | 0o666, os.makedev(1, 3)))
    emit(C, S, "char-lstat", lsdesc(d + "/null"))
    emit(C, S, "char-perm", perm(d + "/null"))
    emit(C, S, "char-rdev", call(lambda: "%d:%d" % (os.major(os.lstat(d + "/null").st_rdev), os.minor(os.lstat(d + "/null").st_rdev))))
    emit(C, S, "block", call(os.mknod, d + "/loop", stat.S_IFBLK | 0o600, os.makedev(7, 200)))
    emit(C, S, "block-lstat", lsdesc(d + "/loop"))
    emit(C, S, "block-rdev", call(lambda: "%d:%d" % (os.major(os.lstat(d + "/loop").st_rdev), os.minor(os.lstat(d + "/loop").st_rdev))))
    emit(C, S, "big-rdev", call(os.mknod, d + "/big", stat.S_IFCHR | 0o600, os.makedev(4000, 70000)))
    emit(C, S, "big-rdev-stat", call(lambda: "%d:%d" % (os.major(os.lstat(d + "/big").st_rdev), os.minor(os.lstat(d + "/big").st_rdev))))
    emit(C, S, "fifo", call(os.mknod, d + "/fifo", stat.S_IFIFO | 0o644))
    emit(C, S, "fifo-lstat", lsdesc(d + "/fifo"))
    emit(C, S, "regular", call(os.mknod, d + "/reg", stat.S_IFREG | 0o640))
    emit(C, S, "regular-lstat", lsdesc(d + "/reg"))
    emit(C, S, "regular-perm", perm(d + "/reg"))
    emit(C, S, "regular-write", call(write_all, d + "/reg", b"a regular file"))
    emit(C, S, "regular-content", content(d + "/reg"))
    emit(C, S, "dir", call(os.mknod, d + "/dir", stat.S_IFDIR | 0o755))
    emit(C, S, "existing", call(os.mknod, d + "/null", stat.S_IFCHR | 0o666, os.makedev(1, 3)))
    emit(C, S, "rename-device", call(os.rename, d + "/null", d + "/null2"))
    emit(C, S, "renamed-rdev", call(lambda: "%d:%d" % (os.major(os.lstat(d + "/null2").st_rdev), os.minor(os.lstat(d + "/null2").st_rdev))))
    emit(C, S, "scandir", call(lambda: sorted("%s:%s" % (e.name, ftype(e.stat(follow_symlinks=False).st_mode)) for e in os.scandir(d))))
    emit(C, S, "char-open-write", call(write_all, d + "/null2", b"into the null device"))
    emit(C, S, "char-open-read", content(d + "/null2"))
    os.mkdir(d + "/open")
    os.chmod(d + "/open", 0o777)
    emit_all(C, "mknod-as-nobody", as_user(lambda: [
        ["char", call(os.mknod, d + "/open/x", stat.S_IFCHR | 0o600, os.makedev(1, 3))],
        ["fifo", call(os.mknod, d + "/open/p", stat.S_IFIFO | 0o600)],
        ["fifo-ids", ids(d + "/open/p")],
        ["mkfifo", call(os.mkfifo, d + "/open/q")],
        ["listing", listing(d + "/open")],
    ]))


# ---------------------------------------------------------------- ctime-nlink

def seq_ctime_nlink():
    C = "ctime-nlink"
    d = fresh()
    os.mkdir(d + "/sub")

    def wr(p, data, flags=os.O_WRONLY):
        return write_all(p, data, flags)

    def ftrunc(p):
        fd = os.open(p, os.O_WRONLY)
        try:
            os.ftruncate(fd, 2)
        finally:
            os.close(fd)

    def pread(p):
        fd = os.open(p, os.O_RDONLY)
        try:
            return len(os.pread(fd, 10, 0))
        finally:
            os.close(fd)

    def write_nothing(p):
        fd = os.open(p, os.O_WRONLY)
        try:
            return os.write(fd, b"")
        finally:
            os.close(fd)

    # (section, step, action on its own file p, the name p has after the action)
    checks = [
        ("moves", "write", lambda p: wr(p, b"abc"), None),
        ("moves", "append", lambda p: wr(p, b"+", os.O_WRONLY | os.O_APPEND), None),
        ("moves", "o-trunc", lambda p: os.close(os.open(p, os.O_WRONLY | os.O_TRUNC)), None),
        ("moves", "truncate", lambda p: os.truncate(p, 4), None),
        ("moves", "truncate-same-size", lambda p: os.truncate(p, 10), None),
        ("moves", "ftruncate", ftrunc, None),
        ("moves", "chmod", lambda p: os.chmod(p, 0o600), None),
        ("moves", "chmod-same", lambda p: os.chmod(p, 0o644), None),
        ("moves", "chown", lambda p: os.chown(p, NOBODY, NOGROUP), None),
        ("moves", "chown-same", lambda p: os.chown(p, 0, 0), None),
        ("moves", "rename", lambda p: os.rename(p, p + ".renamed"), ".renamed"),
        ("moves", "rename-into-subdir", lambda p: os.rename(p, d + "/sub/moved"), "/sub/moved"),
        ("moves", "link", lambda p: os.link(p, p + ".link"), None),
        ("moves", "unlink-other-name", lambda p: os.unlink(p + ".other"), None),
        ("moves", "utime-past", lambda p: os.utime(p, ns=(1500000000000000000, 1500000000000000000)), None),
        ("moves", "utime-now", lambda p: os.utime(p, None), None),
        ("moves", "utime-mtime-only", lambda p: utimensat(p, (0, UTIME_OMIT), (1600000000, 0)), None),
        ("stays", "read", content, None),
        ("stays", "pread", pread, None),
        ("stays", "stat", lambda p: os.stat(p) and None, None),
        ("stays", "access", lambda p: os.access(p, os.W_OK), None),
        ("stays", "listdir-parent", lambda p: os.listdir(d) and None, None),
        ("stays", "open-close-rdwr", lambda p: os.close(os.open(p, os.O_RDWR)), None),
        ("stays", "write-zero-bytes", write_nothing, None),
        ("stays", "failed-open", lambda p: os.open(p + "/x", os.O_RDONLY), None),
        ("stays", "failed-truncate", lambda p: os.truncate(p, -1), None),
        ("stays", "failed-link", lambda p: os.link(p, d + "/sub"), None),
        ("stays", "failed-rename", lambda p: os.rename(p, d + "/sub"), None),
        ("stays", "failed-mkdir", lambda p: os.mkdir(p), None),
        ("stays", "failed-chmod-as-nobody", lambda p: as_user(lambda: [["chmod", call(os.chmod, p, 0o777)]])[0][1], None),
        ("stays", "failed-utime-as-nobody", lambda p: as_user(lambda: [["utime", call(os.utime, p, None)]])[0][1], None),
    ]
    mtime_checks = [
        ("write", lambda p: wr(p, b"abc")),
        ("truncate", lambda p: os.truncate(p, 1)),
        ("chmod", lambda p: os.chmod(p, 0o640)),
        ("chown", lambda p: os.chown(p, NOBODY, -1)),
        ("link", lambda p: os.link(p, p + ".link")),
        ("rename", lambda p: os.rename(p, p + ".renamed")),
    ]
    for i, (section, step, _, _) in enumerate(checks):
        put("%s/c%02d" % (d, i), b"0123456789")
        if step == "unlink-other-name":
            emit(C, section, "prep-link", call(os.link, "%s/c%02d" % (d, i), "%s/c%02d.other" % (d, i)))
        if step.endswith("-as-nobody"):
            os.chmod("%s/c%02d" % (d, i), 0o600)
    for i in range(len(mtime_checks)):
        put("%s/m%02d" % (d, i), b"0123456789")
    for name in ("create", "unlink", "chmod-file", "write-file"):
        os.mkdir(d + "/dir-" + name)
        put(d + "/dir-" + name + "/f")
    put(d + "/back")
    settle()

    for i, (section, step, action, renamed) in enumerate(checks):
        p = "%s/c%02d" % (d, i)
        after = None if renamed is None else (p + renamed if renamed.startswith(".") else d + renamed)
        r, m = moved(p, lambda: action(p), after_path=after)
        emit(C, section, step, r)
        emit(C, section, step + "-moved", m)
    for i, (step, action) in enumerate(mtime_checks):
        p = "%s/m%02d" % (d, i)
        r, m = moved(p, lambda: action(p), mtime_ns, after_path=p + ".renamed" if step == "rename" else None)
        emit(C, "mtime", step, r)
        emit(C, "mtime", step + "-moved", m)
    # a directory's mtime moves when its entries change, not when a file in it does
    for name, action, field in (("create", lambda q: put(q + "/new"), mtime_ns), ("unlink", lambda q: os.unlink(q + "/f"), mtime_ns),
                                ("chmod-file", lambda q: os.chmod(q + "/f", 0o600), mtime_ns), ("write-file", lambda q: wr(q + "/f", b"x"), mtime_ns),
                                ("create-ctime", lambda q: put(q + "/new2"), ctime_ns)):
        q = d + "/dir-" + (name if name != "create-ctime" else "create")
        r, m = moved(q, lambda: action(q), field)
        emit(C, "mtime", "dir-" + name, r)
        emit(C, "mtime", "dir-" + name + "-moved", m)
    # ctime never goes back: a utime into the past leaves it later than before
    S = "never-back"
    p = d + "/back"
    before = ctime_ns(p)
    time.sleep(TICK)
    emit(C, S, "utime-past", call(os.utime, p, ns=(1000000000000000000, 1000000000000000000)))
    emit(C, S, "utime-past-ctime-later", call(lambda: ctime_ns(p) > before))
    emit(C, S, "ctime-after-mtime", call(lambda: ctime_ns(p) > mtime_ns(p)))

    # a directory's link count: 2, plus one per subdirectory
    d = fresh()
    P, Q = d + "/P", d + "/Q"
    S = "dir-nlink"
    emit(C, S, "parent-empty", nlink(d))
    emit(C, S, "mkdir-P", call(os.mkdir, P))
    emit(C, S, "parent-1-sub", nlink(d))
    emit(C, S, "P-empty", nlink(P))
    emit(C, S, "mkdir-P-a", call(os.mkdir, P + "/a"))
    emit(C, S, "P-1-sub", nlink(P))
    emit(C, S, "a-empty", nlink(P + "/a"))
    emit(C, S, "mkdir-P-b", call(os.mkdir, P + "/b"))
    emit(C, S, "P-2-subs", nlink(P))
    emit(C, S, "file-in-P", call(put, P + "/file"))
    emit(C, S, "P-file-not-counted", nlink(P))
    emit(C, S, "fifo-in-P", call(os.mkfifo, P + "/fifo"))
    emit(C, S, "P-fifo-not-counted", nlink(P))
    emit(C, S, "symlink-dir-in-P", call(os.symlink, "a", P + "/sl"))
    emit(C, S, "P-symlink-not-counted", nlink(P))
    emit(C, S, "rmdir-P-b", call(os.rmdir, P + "/b"))
    emit(C, S, "P-after-rmdir", nlink(P))
    emit(C, S, "mkdir-Q", call(os.mkdir, Q))
    emit(C, S, "parent-2-subs", nlink(d))
    emit(C, S, "rename-a-to-Q", call(os.rename, P + "/a", Q + "/a"))
    emit(C, S, "P-after-move-out", nlink(P))
    emit(C, S, "Q-after-move-in", nlink(Q))
    emit(C, S, "mkdir-Q-e", call(os.mkdir, Q + "/e"))
    emit(C, S, "Q-2-subs", nlink(Q))
    emit(C, S, "rename-a-over-e", call(os.rename, Q + "/a", Q + "/e"))
    emit(C, S, "Q-after-replace", nlink(Q))
    emit(C, S, "rename-within", call(os.rename, Q + "/e", Q + "/e2"))
    emit(C, S, "Q-after-rename-within", nlink(Q))
    emit(C, S, "mkdir-nested", call(os.makedirs, Q + "/e2/x/y"))
    emit(C, S, "Q-nested-not-counted", nlink(Q))
    emit(C, S, "e2-1-sub", nlink(Q + "/e2"))
    emit(C, S, "rename-Q-into-P", call(os.rename, Q, P + "/Q"))
    emit(C, S, "P-after-Q-in", nlink(P))
    emit(C, S, "parent-after-Q-out", nlink(d))
    emit(C, S, "file-nlink", nlink(P + "/file"))
    emit(C, S, "fstat-dir", call(lambda: (lambda fd: (os.fstat(fd).st_nlink, os.close(fd))[0])(os.open(P, os.O_RDONLY | os.O_DIRECTORY))))
    emit(C, S, "rmdir-all", call(shutil.rmtree, P))
    emit(C, S, "parent-end", nlink(d))
    # the directory's ctime moves when a subdirectory comes or goes
    r, mv = moved(d, lambda: os.mkdir(d + "/z"))
    emit(C, S, "mkdir-ctime-moved", mv)
    r, mv = moved(d, lambda: os.rmdir(d + "/z"))
    emit(C, S, "rmdir-ctime-moved", mv)

    # a directory made just after its parent was listed (`ls`, then `mkdir`) is as any other
    d = fresh()
    S = "listed-parent"
    emit(C, S, "list", listing(d))
    emit(C, S, "mkdir", call(os.mkdir, d + "/X"))
    emit(C, S, "mkdir-subs", call(lambda: (os.mkdir(d + "/X/a"), os.mkdir(d + "/X/b")) and None))
    emit(C, S, "nlink", nlink(d + "/X"))
    emit(C, S, "chown", call(os.chown, d + "/X", NOBODY, NOGROUP))
    emit(C, S, "ids", ids(d + "/X"))
    emit(C, S, "list-again", listing(d))
    emit(C, S, "mkdir-open", call(lambda: (os.mkdir(d + "/open"), os.chmod(d + "/open", 0o777)) and None))
    emit_all(C, S, as_user(lambda: [["mkfifo-as-nobody", call(os.mkfifo, d + "/open/p")], ["fifo-ids", ids(d + "/open/p")],
                                    ["create-as-nobody", fd_ok(d + "/open/f", os.O_WRONLY | os.O_CREAT)], ["file-ids", ids(d + "/open/f")]]))


# ---------------------------------------------------------------- names

def seq_names():
    C = "names"
    d = fresh()
    n255, n256 = "a" * 255, "b" * 256
    S = "ascii"
    emit(C, S, "namemax", call(lambda: os.statvfs(d).f_namemax))
    emit(C, S, "create-255", fd_ok(d + "/" + n255, os.O_WRONLY | os.O_CREAT))
    emit(C, S, "stat-255", describe(d + "/" + n255))
    emit(C, S, "write-255", call(write_all, d + "/" + n255, b"long"))
    emit(C, S, "read-255", content(d + "/" + n255))
    emit(C, S, "create-256", fd_ok(d + "/" + n256, os.O_WRONLY | os.O_CREAT))
    emit(C, S, "stat-256", describe(d + "/" + n256))
    emit(C, S, "open-256", fd_ok(d + "/" + n256, os.O_RDONLY))
    emit(C, S, "create-1025", fd_ok(d + "/" + "c" * 1025, os.O_WRONLY | os.O_CREAT))
    emit(C, S, "mkdir-255", call(os.mkdir, d + "/d" + "a" * 254))
    emit(C, S, "mkdir-256", call(os.mkdir, d + "/d" + "a" * 255))
    emit(C, S, "rename-to-255", call(os.rename, d + "/" + n255, d + "/r" + "a" * 254))
    emit(C, S, "rename-to-256", call(os.rename, d + "/r" + "a" * 254, d + "/" + n256))
    emit(C, S, "rename-dir-to-256", call(os.rename, d + "/d" + "a" * 254, d + "/e" + "a" * 255))
    emit(C, S, "rename-from-256", call(os.rename, d + "/" + n256, d + "/x"))
    emit(C, S, "symlink-name-255", call(os.symlink, "target", d + "/s" + "a" * 254))
    emit(C, S, "symlink-name-256", call(os.symlink, "target", d + "/s" + "a" * 255))
    emit(C, S, "symlink-target-256-ok", call(os.symlink, n256, d + "/t"))
    emit(C, S, "link-name-255", call(os.link, d + "/r" + "a" * 254, d + "/l" + "a" * 254))
    emit(C, S, "link-name-256", call(os.link, d + "/r" + "a" * 254, d + "/l" + "a" * 255))
    emit(C, S, "mkfifo-256", call(os.mkfifo, d + "/p" + "a" * 255))
    emit(C, S, "unlink-256", call(os.unlink, d + "/" + n256))
    emit(C, S, "rmdir-256", call(os.rmdir, d + "/" + n256))
    emit(C, S, "chmod-256", call(os.chmod, d + "/" + n256, 0o600))
    emit(C, S, "dir-component-256", describe(d + "/" + n256 + "/x"))
    emit(C, S, "create-under-256-component", fd_ok(d + "/" + n256 + "/x", os.O_WRONLY | os.O_CREAT))
    emit(C, S, "listing", call(lambda: sorted("%s*%d" % (n[0], len(n)) for n in os.listdir(d))))
    emit(C, S, "create-in-255-dir", call(put, d + "/d" + "a" * 254 + "/" + n255, b"deep"))
    emit(C, S, "read-in-255-dir", content(d + "/d" + "a" * 254 + "/" + n255))

    # multibyte names: NAME_MAX counts bytes, not characters
    d = fresh()
    S = "multibyte"
    for label, ch, width in (("2-byte", "\u00e9", 2), ("3-byte", "\u2713", 3), ("4-byte", "\U0001F600", 4)):
        fit = ch * (255 // width) + "z" * (255 % width)
        over = ch * (255 // width) + "z" * (255 % width + 1)
        emit(C, S, label + "-fit-bytes", len(fit.encode()))
        emit(C, S, label + "-create-255", fd_ok(d + "/" + fit, os.O_WRONLY | os.O_CREAT))
        emit(C, S, label + "-stat-255", describe(d + "/" + fit))
        emit(C, S, label + "-create-256", fd_ok(d + "/" + over, os.O_WRONLY | os.O_CREAT))
        emit(C, S, label + "-mkdir-256", call(os.mkdir, d + "/" + over))
        emit(C, S, label + "-rename-256", call(os.rename, d + "/" + fit, d + "/" + over))
        emit(C, S, label + "-mkdir-chars-ok-bytes-over", call(os.mkdir, d + "/" + ch * 128))
    emit(C, S, "listing-bytes", call(lambda: sorted(len(n.encode()) for n in os.listdir(d))))
    emit(C, S, "listing-equal", call(lambda: sorted(os.listdir(d)) == sorted(ch * (255 // w) + "z" * (255 % w) for ch, w in (("\u00e9", 2), ("\u2713", 3), ("\U0001F600", 4)))))

    # PATH_MAX: a path of 4096 bytes or more is refused before any lookup; below a directory
    # opened on the way, the rest of a long path works as on a disk
    d = fresh()
    S = "path-max"

    def path_of(total, base=d):
        """An absolute path of exactly `total` bytes: components of 200 bytes under base."""
        p = base
        while len(p.encode()) + 201 <= total:
            p += "/" + "p" * 200
        rest = total - len(p.encode()) - 1
        return p + "/" + "q" * rest if rest > 0 else p + "/" * (total - len(p.encode()))
    emit(C, S, "lengths", [len(path_of(4095).encode()), len(path_of(4096).encode())])
    emit(C, S, "stat-4095", describe(path_of(4095)))
    emit(C, S, "stat-4096", describe(path_of(4096)))
    emit(C, S, "create-4096", fd_ok(path_of(4096), os.O_WRONLY | os.O_CREAT))
    emit(C, S, "mkdir-5000", call(os.mkdir, path_of(5000)))
    emit(C, S, "symlink-name-4096", call(os.symlink, "x", path_of(4096)))
    emit(C, S, "rename-to-4096", call(lambda: (put(d + "/f"), os.rename(d + "/f", path_of(4096)))))

    def deep():
        """30 levels of 200-byte names (over 6,000 bytes), made and used through descriptors."""
        fds = [os.open(d, os.O_RDONLY | os.O_DIRECTORY)]
        try:
            for _ in range(30):
                os.mkdir("p" * 200, dir_fd=fds[-1])
                fds.append(os.open("p" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
            fd = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fds[-1])
            os.write(fd, b"at the bottom")
            os.close(fd)
            fd = os.open("leaf", os.O_RDONLY, dir_fd=fds[-1])
            data = os.read(fd, 100).decode()
            os.close(fd)
            return [data, os.listdir(fds[-1]), len(os.listdir(fds[-11])), call(os.stat, "/".join([d] + ["p" * 200] * 30) + "/leaf")]
        finally:
            for fd in fds:
                os.close(fd)
    emit(C, S, "deep-tree", call(lambda: [x if not isinstance(x, os.stat_result) else "stat-ok" for x in deep()]))
    emit(C, S, "deep-relative", call(lambda: content_at(d + "/" + "/".join(["p" * 200] * 15), "/".join(["p" * 200] * 15) + "/leaf")))
    emit(C, S, "rmtree", call(shutil.rmtree, d + "/" + "p" * 200))
    emit(C, S, "listing", listing(d))


def content_at(directory, rel):
    """Reads `rel` (a long relative path) below `directory`, opened first."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = os.open(rel, os.O_RDONLY, dir_fd=dfd)
        try:
            return os.read(fd, 100).decode()
        finally:
            os.close(fd)
    finally:
        os.close(dfd)


SEQUENCES = [seq_open, seq_creat, seq_read_write, seq_truncate, seq_rename, seq_unlink, seq_mkdir, seq_rmdir, seq_link, seq_symlink, seq_chmod,
             seq_utimensat, seq_stat, seq_readdir, seq_owners, seq_sticky_setgid, seq_fifos, seq_ctime_nlink, seq_names]

RUN_TIMEOUT = 240  # seconds: the whole run, however a call hangs (SIGALRM's default action ends the process)

if __name__ == "__main__":
    signal.alarm(RUN_TIMEOUT)
    only = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None
    for seq in SEQUENCES:
        cat = seq.__name__[4:].replace("_", "-")
        if only and cat not in only:
            continue
        try:
            seq()
        except OSError as e:  # a setup step failed: that is a result too
            emit(cat, "setup", "failed", "errno:" + errno.errorcode.get(e.errno, str(e.errno)) + " " + str(e))
        except Exception as e:  # noqa: BLE001 — a broken sequence is reported, the others still run
            emit(cat, "setup", "failed", "%s: %s" % (type(e).__name__, e))
    cleanup()
    for line in _out:
        print(json.dumps(line, ensure_ascii=False))
