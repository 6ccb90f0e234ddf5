/*
 * The attribute mirror. The vfs is the only place attributes are decided; this holds, per
 * node, the exact GETATTR reply it last gave (published by the raw transport), so that the
 * next GETATTR of that node is answered here: no JavaScript, one read and one write.
 *
 * What keeps it right:
 *  - Every request that may change a node's attributes drops that node when it is read
 *    (before any later request is answered) and again when JS has answered it. Requests
 *    that change names drop their directory here (as they arrive, a rename's new directory
 *    and a link's linked node too), and the transport drops the nodes the names lead to (it
 *    knows the names; this does not), with the new directory and the linked node, as it
 *    takes the request, before any later one is read, and again once it is answered.
 *    Requests this file does not know drop everything.
 *  - Every drop moves the epoch and stamps the node's slot with it. A publish carries the
 *    epoch its attributes were computed in and is refused if its slot was stamped (or
 *    everything cleared) since: a GETATTR computed while a write was in flight can never
 *    outlive the write, while work on other nodes meanwhile does not get in the way.
 *  - An entry lives at most the attribute TTL the vfs gave it, as in the kernel's own cache.
 *    Changes made elsewhere reach the vfs's change feed, which drops the paths' nodes.
 *  - It only runs on the event loop's thread, inside the device read JS called, so a JS
 *    drop can never race an answer here.
 *
 * Direct-mapped by node id: node ids are handed out in sequence, so the most recent `slots`
 * nodes never collide, and memory is a constant (slots x 128 bytes, touched as used).
 */
#include "attr_mirror.h"
#include "wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

enum {
  OP_LOOKUP = 1, OP_FORGET = 2, OP_GETATTR = 3, OP_SETATTR = 4, OP_READLINK = 5, OP_SYMLINK = 6,
  OP_MKNOD = 8, OP_MKDIR = 9, OP_UNLINK = 10, OP_RMDIR = 11, OP_RENAME = 12, OP_LINK = 13, OP_OPEN = 14, OP_READ = 15, OP_WRITE = 16, OP_STATFS = 17,
  OP_RELEASE = 18, OP_FSYNC = 20, OP_SETXATTR = 21, OP_GETXATTR = 22, OP_LISTXATTR = 23,
  OP_REMOVEXATTR = 24, OP_FLUSH = 25, OP_INIT = 26, OP_OPENDIR = 27, OP_READDIR = 28,
  OP_RELEASEDIR = 29, OP_FSYNCDIR = 30, OP_GETLK = 31, OP_SETLK = 32, OP_SETLKW = 33,
  OP_ACCESS = 34, OP_CREATE = 35, OP_INTERRUPT = 36, OP_BMAP = 37, OP_DESTROY = 38,
  OP_IOCTL = 39, OP_POLL = 40, OP_BATCH_FORGET = 42, OP_FALLOCATE = 43, OP_READDIRPLUS = 44, OP_RENAME2 = 45, OP_LSEEK = 46,
  OP_TMPFILE = 51, OP_STATX = 52,
};


typedef struct {
  uint64_t nodeid;
  int64_t expires_ns;
  uint32_t generation;
  /* The epoch of the last drop of any node of this slot (kept when the entry goes). */
  uint32_t dropped;
  uint8_t attr_out[ATTR_OUT_SIZE];
} slot;

struct attr_mirror {
  slot *slots;
  uint32_t mask;
  /* mirror_clear makes every slot stale at once: a slot counts only at the current generation. */
  uint32_t generation;
  /* The epoch of the last mirror_clear. */
  uint32_t cleared;
  int32_t *shared;
};

attr_mirror *mirror_new(uint32_t slots, int32_t *shared) {
  uint32_t size = table_size(slots);
  attr_mirror *mirror = calloc(1, sizeof *mirror);
  if (!mirror) return NULL;
  mirror->slots = calloc(size, sizeof(slot));
  if (!mirror->slots) {
    free(mirror);
    return NULL;
  }
  mirror->mask = size - 1;
  mirror->generation = 1;
  mirror->shared = shared;
  return mirror;
}

void mirror_free(attr_mirror *mirror) {
  if (!mirror) return;
  free(mirror->slots);
  free(mirror);
}

static slot *held(attr_mirror *mirror, uint64_t nodeid) {
  slot *s = &mirror->slots[nodeid & mirror->mask];
  return s->nodeid == nodeid && s->generation == mirror->generation ? s : NULL;
}

/* Forgets without moving the epoch: for nodes the kernel forgot (no reply can be in flight for them). */
static void forget_node(attr_mirror *mirror, uint64_t nodeid) {
  slot *s = held(mirror, nodeid);
  if (s) s->generation = 0;
}

/* The epoch wraps at 2^32: epochs are compared by their distance (see later). */
static uint32_t next_epoch(attr_mirror *mirror) {
  uint32_t epoch = (uint32_t)mirror->shared[0] + 1;
  mirror->shared[0] = (int32_t)epoch;
  return epoch;
}

static int later(uint32_t a, uint32_t b) {
  return (int32_t)(a - b) > 0;
}

void mirror_drop(attr_mirror *mirror, uint64_t nodeid) {
  forget_node(mirror, nodeid);
  mirror->slots[nodeid & mirror->mask].dropped = next_epoch(mirror);
}

void mirror_clear(attr_mirror *mirror) {
  if (++mirror->generation == 0) {
    /* Wrapped: slots made 2^32 clears ago must not come back. */
    memset(mirror->slots, 0, ((size_t)mirror->mask + 1) * sizeof(slot));
    mirror->generation = 1;
  }
  mirror->cleared = next_epoch(mirror);
}

/* What a request may change: nothing, its own node (for a directory, its entries), or anything. */
typedef enum { CHANGES_NOTHING, CHANGES_NODE, CHANGES_ANY } change;

static change changes_of(uint32_t opcode, uint32_t open_flags) {
  switch (opcode) {
    case OP_LOOKUP: case OP_GETATTR: case OP_READLINK: case OP_STATFS: case OP_GETXATTR:
    case OP_LISTXATTR: case OP_OPENDIR: case OP_RELEASEDIR: case OP_FSYNCDIR: case OP_ACCESS:
    case OP_INTERRUPT: case OP_GETLK: case OP_LSEEK: case OP_STATX: case OP_POLL: case OP_BMAP:
    case OP_INIT: case OP_DESTROY: case OP_FORGET: case OP_BATCH_FORGET:
    /* The vfs answers every IOCTL ENOSYS (Python's open() sends one: its isatty()). */
    case OP_IOCTL:
      return CHANGES_NOTHING;
    case OP_OPEN:
      /* A read-only open changes nothing; a writable one may truncate or hand the file to the kernel. */
      return (open_flags & (O_ACCMODE_BITS | O_TRUNC_BIT)) == 0 ? CHANGES_NOTHING : CHANGES_NODE;
    case OP_RELEASE:
      /* A reader's close changes nothing (`grep -r` twice: the second stat of each file is answered here); a writer's saves. */
      return (open_flags & O_ACCMODE_BITS) == 0 ? CHANGES_NOTHING : CHANGES_NODE;
    /* READ and READDIR move the access time the kernel then asks for. */
    case OP_READ: case OP_READDIR: case OP_READDIRPLUS:
    case OP_SETATTR: case OP_WRITE: case OP_FLUSH: case OP_FSYNC:
    case OP_SETXATTR: case OP_REMOVEXATTR: case OP_FALLOCATE: case OP_SETLK: case OP_SETLKW:
    /* A new entry changes its directory; the new node itself was never held. */
    case OP_CREATE: case OP_MKNOD: case OP_MKDIR: case OP_SYMLINK: case OP_TMPFILE:
    /* A name removed, moved or added: its directory here (the other node in mirror_arrived, the named ones by the transport). */
    case OP_UNLINK: case OP_RMDIR: case OP_RENAME: case OP_RENAME2: case OP_LINK:
      return CHANGES_NODE;
    default:
      /* COPY_FILE_RANGE, and whatever comes next. */
      return CHANGES_ANY;
  }
}

static void apply(attr_mirror *mirror, change what, uint64_t nodeid) {
  if (what == CHANGES_NODE) mirror_drop(mirror, nodeid);
  else if (what == CHANGES_ANY) mirror_clear(mirror);
}

void mirror_arrived(attr_mirror *mirror, const uint8_t *request, size_t length) {
  if (length < IN_HEADER_SIZE) return;
  uint32_t opcode = u32_at(request + 4);
  uint64_t nodeid = u64_at(request + 16);
  const uint8_t *body = request + IN_HEADER_SIZE;
  size_t body_length = length - IN_HEADER_SIZE;
  if (opcode == OP_FORGET) {
    forget_node(mirror, nodeid);
    return;
  }
  if (opcode == OP_BATCH_FORGET && body_length >= 8) {
    uint32_t count = u32_at(body);
    for (uint32_t i = 0; i < count && 8 + (size_t)(i + 1) * 16 <= body_length; i++) forget_node(mirror, u64_at(body + 8 + (size_t)i * 16));
    return;
  }
  /* The open flags: fuse_open_in's first field, fuse_release_in's second. */
  uint32_t open_flags = opcode == OP_OPEN && body_length >= 4 ? u32_at(body) : opcode == OP_RELEASE && body_length >= 12 ? u32_at(body + 8) : 0;
  apply(mirror, changes_of(opcode, open_flags), nodeid);
  /* fuse_rename_in's and fuse_rename2_in's first field: the new directory; fuse_link_in's: the node linked. */
  if ((opcode == OP_RENAME || opcode == OP_RENAME2 || opcode == OP_LINK) && body_length >= 8) mirror_drop(mirror, u64_at(body));
}

void mirror_settled(attr_mirror *mirror, uint32_t opcode, uint64_t nodeid, uint32_t open_flags) {
  apply(mirror, changes_of(opcode, open_flags), nodeid);
}

int mirror_answer(attr_mirror *mirror, int fd, const uint8_t *request, size_t length) {
  if (length < IN_HEADER_SIZE || u32_at(request + 4) != OP_GETATTR) return 0;
  slot *s = held(mirror, u64_at(request + 16));
  if (!s) return 0;
  if (s->expires_ns <= now_ns()) {
    s->generation = 0;
    return 0;
  }
  uint8_t header[OUT_HEADER_SIZE];
  uint32_t total = OUT_HEADER_SIZE + ATTR_OUT_SIZE;
  int32_t error = 0;
  memcpy(header, &total, 4);
  memcpy(header + 4, &error, 4);
  memcpy(header + 8, request + 8, 8); /* unique */
  struct iovec parts[2] = {{header, OUT_HEADER_SIZE}, {s->attr_out, ATTR_OUT_SIZE}};
  /* ENOENT: the request was interrupted meanwhile; nothing to answer, it was answered all the same. */
  while (writev(fd, parts, 2) < 0 && errno == EINTR) {}
  return 1;
}

int mirror_peek(attr_mirror *mirror, uint64_t nodeid, uint8_t *attr_out, int64_t *expires_ns) {
  slot *s = held(mirror, nodeid);
  if (!s || s->expires_ns <= now_ns()) return 0;
  memcpy(attr_out, s->attr_out, ATTR_OUT_SIZE);
  *expires_ns = s->expires_ns;
  return 1;
}

/* fuse_attr_out: the attributes start at 16; mtime and ctime seconds at +32, +40, their nanoseconds at +52, +56. */
static void raise_time(uint8_t *attr, size_t sec_at, size_t nsec_at, int64_t at_ms) {
  uint64_t sec = u64_at(attr + sec_at);
  uint32_t nsec = u32_at(attr + nsec_at);
  uint64_t at_sec = (uint64_t)(at_ms / 1000);
  uint32_t at_nsec = (uint32_t)(at_ms % 1000) * 1000000;
  if (sec > at_sec || (sec == at_sec && nsec >= at_nsec)) return;
  memcpy(attr + sec_at, &at_sec, 8);
  memcpy(attr + nsec_at, &at_nsec, 4);
}

void mirror_entries_changed(attr_mirror *mirror, uint64_t nodeid, const uint8_t *before, int64_t expires_ns, int64_t at_ms) {
  slot *s = &mirror->slots[nodeid & mirror->mask];
  memcpy(s->attr_out, before, ATTR_OUT_SIZE);
  raise_time(s->attr_out + 16, 32, 52, at_ms);
  raise_time(s->attr_out + 16, 40, 56, at_ms);
  s->nodeid = nodeid;
  s->generation = mirror->generation;
  s->expires_ns = expires_ns;
}

int mirror_publish(attr_mirror *mirror, uint64_t nodeid, const uint8_t *attr_out, uint32_t ttl_ms, int32_t epoch) {
  slot *s = &mirror->slots[nodeid & mirror->mask];
  if (ttl_ms == 0 || later(s->dropped, (uint32_t)epoch) || later(mirror->cleared, (uint32_t)epoch)) return 0;
  s->nodeid = nodeid;
  s->generation = mirror->generation;
  s->expires_ns = now_ns() + (int64_t)ttl_ms * 1000000;
  memcpy(s->attr_out, attr_out, ATTR_OUT_SIZE);
  return 1;
}
