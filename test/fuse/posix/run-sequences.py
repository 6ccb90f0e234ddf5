#!/usr/bin/env python3
"""POSIX syscall sequences for the differential conformance test (test/fuse/posix-diff.test.ts).

usage: run-sequences.py ROOT
Runs every sequence in a fresh directory under ROOT (which must exist) and prints one JSON
line per step: {"cat": category, "id": step id, "result": what the call returned or
"errno:NAME"}. The same script runs on the local disk and on mounts; the test compares
the outputs step by step. Categories follow pjdfstest.
"""
import ctypes
import errno
import json
import os
import shutil
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
    d = os.path.join(ROOT, "s%04d" % _counter[0])
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


SEQUENCES = [seq_open, seq_creat, seq_read_write, seq_truncate, seq_rename, seq_unlink, seq_mkdir, seq_rmdir, seq_link, seq_symlink, seq_chmod, seq_utimensat, seq_stat, seq_readdir]

if __name__ == "__main__":
    only = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None
    for seq in SEQUENCES:
        if only and seq.__name__[4:].replace("_", "-") not in only:
            continue
        try:
            seq()
        except OSError as e:  # a setup step failed: that is a result too
            emit(seq.__name__[4:].replace("_", "-"), "setup", "failed", "errno:" + errno.errorcode.get(e.errno, str(e.errno)) + " " + str(e))
    cleanup()
    for line in _out:
        print(json.dumps(line, ensure_ascii=False))
