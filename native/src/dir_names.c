/*
 * Directory names. The vfs decides whether a name exists; when it holds a fresh listing of a
 * directory, it answers the lookup of any name outside it "no such entry" without asking its
 * backend, and publishes that listing here so that those lookups (every file a build, `cp -r`,
 * `tar x` or git creates is looked up first) are answered without entering JavaScript.
 *
 * What keeps it right: a directory's set only ever has to be a superset of its names.
 *  - Every request that may make a name (CREATE, MKNOD, MKDIR, SYMLINK, LINK, RENAME,
 *    RENAME2) adds that name to its directory's set when it is read, before any later request
 *    is answered. One this file does not know drops every set (IOCTL is known: the vfs
 *    answers every one ENOSYS, and Python's open() sends one, its isatty()). Removing a
 *    name leaves it in the set: its lookup goes to JavaScript.
 *  - Those requests move the epoch when they are read, and count as pending until JS has
 *    answered them. A publish carries the epoch read when its LOOKUP was handled and is
 *    refused if the epoch moved since or such a request is pending: a listing read while a
 *    name was being made can never be held.
 *  - A set lives at most as long as the vfs's listing is fresh, as the vfs's own answers;
 *    a change the vfs hears of from elsewhere drops the set of the directory it is in and
 *    of the path itself (names_drop), a report of everything drops all (names_clear). A
 *    directory the kernel forgets loses its set (its node id may be handed out again).
 *  - Only names JS would decode to the same bytes (valid UTF-8, not "." or "..") are
 *    answered here.
 *  - It only runs on the event loop's thread, inside the device read JS called.
 *
 * Each set holds 64-bit hashes of the names: two names with one hash make a lookup go to
 * JavaScript, never the other way. Direct-mapped by directory node id; memory is at most
 * dirs x 2 x DIR_NAMES_MAX x 8 bytes (64 directories: 16 MiB), allocated as published.
 */
#define _GNU_SOURCE /* O_PATH */
#include "dir_names.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

enum {
  OP_LOOKUP = 1, OP_FORGET = 2, OP_GETATTR = 3, OP_SETATTR = 4, OP_READLINK = 5, OP_SYMLINK = 6,
  OP_MKNOD = 8, OP_MKDIR = 9, OP_UNLINK = 10, OP_RMDIR = 11, OP_RENAME = 12, OP_LINK = 13,
  OP_OPEN = 14, OP_READ = 15, OP_WRITE = 16, OP_STATFS = 17, OP_RELEASE = 18, OP_FSYNC = 20,
  OP_SETXATTR = 21, OP_GETXATTR = 22, OP_LISTXATTR = 23, OP_REMOVEXATTR = 24, OP_FLUSH = 25,
  OP_INIT = 26, OP_OPENDIR = 27, OP_READDIR = 28, OP_RELEASEDIR = 29, OP_FSYNCDIR = 30,
  OP_GETLK = 31, OP_SETLK = 32, OP_SETLKW = 33, OP_ACCESS = 34, OP_CREATE = 35, OP_INTERRUPT = 36,
  OP_BMAP = 37, OP_DESTROY = 38, OP_IOCTL = 39, OP_POLL = 40, OP_BATCH_FORGET = 42, OP_FALLOCATE = 43,
  OP_READDIRPLUS = 44, OP_RENAME2 = 45, OP_LSEEK = 46, OP_TMPFILE = 51, OP_STATX = 52,
};

typedef struct {
  uint64_t nodeid; /* 0: none */
  int64_t expires_ns;
  uint32_t count;
  uint32_t mask; /* capacity - 1 */
  uint64_t *hashes; /* 0: an empty place */
  int granted;
  made_grant grant; /* while granted: its dirfd is this set's own */
} dir_set;

struct dir_names {
  dir_set *dirs;
  uint32_t mask;
  int32_t *epoch;
  /* Requests that may make a name, read and not yet answered by JS. */
  uint32_t pending;
  uint8_t negative[ENTRY_OUT_SIZE];
};

dir_names *names_new(uint32_t dirs, int32_t *epoch) {
  uint32_t size = table_size(dirs);
  dir_names *names = calloc(1, sizeof *names);
  if (!names) return NULL;
  names->dirs = calloc(size, sizeof(dir_set));
  if (!names->dirs) {
    free(names);
    return NULL;
  }
  names->mask = size - 1;
  names->epoch = epoch;
  return names;
}

static void end_grant(dir_set *set) {
  if (set->granted) close(set->grant.dirfd);
  set->granted = 0;
}

static void drop_set(dir_set *set) {
  end_grant(set);
  free(set->hashes);
  memset(set, 0, sizeof *set);
}

void names_free(dir_names *names) {
  if (!names) return;
  for (uint32_t i = 0; i <= names->mask; i++) drop_set(&names->dirs[i]);
  free(names->dirs);
  free(names);
}

static void move_epoch(dir_names *names) {
  *names->epoch = (int32_t)((uint32_t)*names->epoch + 1);
}

void names_clear(dir_names *names) {
  for (uint32_t i = 0; i <= names->mask; i++) drop_set(&names->dirs[i]);
  move_epoch(names);
}

void names_drop(dir_names *names, uint64_t nodeid) {
  dir_set *set = &names->dirs[nodeid & names->mask];
  if (set->nodeid == nodeid) drop_set(set);
  move_epoch(names);
}

/* FNV-1a; 0 marks an empty place, so no name hashes to it. */
static uint64_t hash_of(const uint8_t *name, size_t length) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < length; i++) h = (h ^ name[i]) * 1099511628211ull;
  return h ? h : 1;
}

static dir_set *held(dir_names *names, uint64_t nodeid) {
  dir_set *set = &names->dirs[nodeid & names->mask];
  return set->nodeid == nodeid && nodeid != 0 ? set : NULL;
}

static int contains(const dir_set *set, uint64_t h) {
  for (uint32_t i = (uint32_t)h & set->mask;; i = (i + 1) & set->mask) {
    if (set->hashes[i] == h) return 1;
    if (set->hashes[i] == 0) return 0;
  }
}

static void insert(dir_set *set, uint64_t h) {
  uint32_t i = (uint32_t)h & set->mask;
  while (set->hashes[i] != 0) {
    if (set->hashes[i] == h) return;
    i = (i + 1) & set->mask;
  }
  set->hashes[i] = h;
  set->count++;
}

/* Places for `count` names at a load of at most a half. */
static int make_room(dir_set *set, uint32_t count) {
  uint32_t capacity = 64;
  while (capacity < 2 * count) capacity <<= 1;
  if (set->hashes && capacity <= set->mask + 1) return 1;
  uint64_t *old = set->hashes;
  uint32_t old_capacity = old ? set->mask + 1 : 0;
  set->hashes = calloc(capacity, sizeof(uint64_t));
  if (!set->hashes) {
    set->hashes = old;
    return 0;
  }
  set->mask = capacity - 1;
  set->count = 0;
  for (uint32_t i = 0; i < old_capacity; i++) if (old[i]) insert(set, old[i]);
  free(old);
  return 1;
}

/* A name made in `nodeid`: held from now on (or the set dropped, when it cannot grow). */
static void add_name(dir_names *names, uint64_t nodeid, const uint8_t *name, size_t length) {
  dir_set *set = held(names, nodeid);
  if (!set) return;
  if (set->count + 1 > DIR_NAMES_MAX || !make_room(set, set->count + 1)) {
    drop_set(set);
    return;
  }
  insert(set, hash_of(name, length));
}

/* The length of the NUL-terminated name at `at` within `end`; -1 without a NUL. */
static long name_length(const uint8_t *at, const uint8_t *end) {
  const uint8_t *nul = at < end ? memchr(at, 0, (size_t)(end - at)) : NULL;
  return nul ? (long)(nul - at) : -1;
}

typedef enum { MAKES_NOTHING, MAKES_NAME, MAKES_ANY } making;

static making making_of(uint32_t opcode) {
  switch (opcode) {
    case OP_CREATE: case OP_MKNOD: case OP_MKDIR: case OP_SYMLINK: case OP_LINK: case OP_RENAME: case OP_RENAME2:
      return MAKES_NAME;
    case OP_LOOKUP: case OP_FORGET: case OP_GETATTR: case OP_SETATTR: case OP_READLINK: case OP_UNLINK:
    case OP_RMDIR: case OP_OPEN: case OP_READ: case OP_WRITE: case OP_STATFS: case OP_RELEASE: case OP_FSYNC:
    case OP_SETXATTR: case OP_GETXATTR: case OP_LISTXATTR: case OP_REMOVEXATTR: case OP_FLUSH: case OP_INIT:
    case OP_OPENDIR: case OP_READDIR: case OP_RELEASEDIR: case OP_FSYNCDIR: case OP_GETLK: case OP_SETLK:
    case OP_SETLKW: case OP_ACCESS: case OP_INTERRUPT: case OP_BMAP: case OP_DESTROY: case OP_IOCTL: case OP_POLL:
    case OP_BATCH_FORGET: case OP_FALLOCATE: case OP_READDIRPLUS: case OP_LSEEK: case OP_TMPFILE: case OP_STATX:
      return MAKES_NOTHING;
    default:
      return MAKES_ANY;
  }
}

/* The directory and name a name-making request makes; 0 when its body is not as expected. */
static int made_name(const uint8_t *request, size_t length, uint64_t *dir, const uint8_t **name, size_t *name_len) {
  uint32_t opcode = u32_at(request + 4);
  const uint8_t *body = request + IN_HEADER_SIZE;
  const uint8_t *end = request + length;
  *dir = u64_at(request + 16);
  size_t skip;
  switch (opcode) {
    case OP_CREATE: skip = 16; break; /* fuse_create_in */
    case OP_MKNOD: skip = 16; break; /* fuse_mknod_in */
    case OP_MKDIR: skip = 8; break; /* fuse_mkdir_in */
    case OP_LINK: skip = 8; break; /* fuse_link_in */
    case OP_SYMLINK: skip = 0; break; /* the name, then the target */
    case OP_RENAME: case OP_RENAME2: {
      /* fuse_rename_in / fuse_rename2_in (newdir first), the old name, the new name */
      skip = opcode == OP_RENAME ? 8 : 16;
      if ((size_t)(end - body) < skip) return 0;
      *dir = u64_at(body);
      long old_len = name_length(body + skip, end);
      if (old_len < 0) return 0;
      skip += (size_t)old_len + 1;
      break;
    }
    default: return 0;
  }
  if ((size_t)(end - body) < skip) return 0;
  long n = name_length(body + skip, end);
  if (n < 0) return 0;
  *name = body + skip;
  *name_len = (size_t)n;
  return 1;
}

void names_arrived(dir_names *names, const uint8_t *request, size_t length) {
  if (length < IN_HEADER_SIZE) return;
  uint32_t opcode = u32_at(request + 4);
  const uint8_t *body = request + IN_HEADER_SIZE;
  size_t body_length = length - IN_HEADER_SIZE;
  if (opcode == OP_FORGET) {
    dir_set *set = held(names, u64_at(request + 16));
    if (set) drop_set(set);
    return;
  }
  if (opcode == OP_BATCH_FORGET && body_length >= 8) {
    uint32_t count = u32_at(body);
    for (uint32_t i = 0; i < count && 8 + (size_t)(i + 1) * 16 <= body_length; i++) {
      dir_set *set = held(names, u64_at(body + 8 + (size_t)i * 16));
      if (set) drop_set(set);
    }
    return;
  }
  if (opcode == OP_SETATTR) {
    /* A chmod or chown of a directory changes what its new files get. */
    dir_set *set = held(names, u64_at(request + 16));
    if (set) end_grant(set);
  }
  making what = making_of(opcode);
  if (what == MAKES_NOTHING) return;
  names->pending++;
  move_epoch(names);
  uint64_t dir;
  const uint8_t *name;
  size_t name_len;
  if (what == MAKES_NAME && made_name(request, length, &dir, &name, &name_len)) add_name(names, dir, name, name_len);
  else names_clear(names);
}

void names_settled(dir_names *names, uint32_t opcode) {
  if (making_of(opcode) != MAKES_NOTHING && names->pending > 0) names->pending--;
}

/* Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), as JS decodes it unchanged. */
static int valid_utf8(const uint8_t *s, size_t length) {
  for (size_t i = 0; i < length;) {
    uint8_t c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t n;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0) n = 2, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) n = 3, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) n = 4, cp = c & 0x07, min = 0x10000;
    else return 0;
    if (i + n > length) return 0;
    for (size_t k = 1; k < n; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    i += n;
  }
  return 1;
}

/* A name the addon may answer for: as LOOKUP's rules (as JS would decode it; not "." nor ".."). */
static int answerable(const uint8_t *name, long n) {
  return n > 0 && n <= 255 && !(n == 1 && name[0] == '.') && !(n == 2 && name[0] == '.' && name[1] == '.') && valid_utf8(name, (size_t)n);
}

int names_answer(dir_names *names, int fd, const uint8_t *request, size_t length) {
  if (length < IN_HEADER_SIZE || u32_at(request + 4) != OP_LOOKUP) return 0;
  dir_set *set = held(names, u64_at(request + 16));
  if (!set) return 0;
  if (set->expires_ns <= now_ns()) {
    drop_set(set);
    return 0;
  }
  const uint8_t *name = request + IN_HEADER_SIZE;
  long n = name_length(name, request + length);
  if (!answerable(name, n) || contains(set, hash_of(name, (size_t)n))) return 0;
  uint8_t header[OUT_HEADER_SIZE];
  uint32_t total = OUT_HEADER_SIZE + ENTRY_OUT_SIZE;
  int32_t error = 0;
  memcpy(header, &total, 4);
  memcpy(header + 4, &error, 4);
  memcpy(header + 8, request + 8, 8); /* unique */
  struct iovec parts[2] = {{header, OUT_HEADER_SIZE}, {names->negative, ENTRY_OUT_SIZE}};
  /* ENOENT: the request was interrupted meanwhile; nothing to answer, it was answered all the same. */
  while (writev(fd, parts, 2) < 0 && errno == EINTR) {}
  return 1;
}

int names_grant(dir_names *names, uint64_t nodeid, const char *host_dir, int32_t gid, int32_t umask, uint32_t ttl_ms, uint32_t open_flags) {
  dir_set *set = held(names, nodeid);
  if (!set || ttl_ms == 0) return 0;
  int dirfd = open(host_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dirfd < 0) return 0;
  end_grant(set);
  set->grant = (made_grant){.dirfd = dirfd, .gid = gid, .umask = umask, .ttl_ms = ttl_ms, .open_flags = open_flags};
  set->granted = 1;
  return 1;
}

int names_is_granted(dir_names *names, uint64_t nodeid) {
  dir_set *set = held(names, nodeid);
  return set && set->granted && set->expires_ns > now_ns();
}

int names_granted(dir_names *names, uint64_t nodeid, const uint8_t *name, size_t length, made_grant *out) {
  dir_set *set = held(names, nodeid);
  if (!set || !set->granted || set->expires_ns <= now_ns() || !answerable(name, (long)length)) return 0;
  /* What a route's path rules may refuse (paths.ts checkVirtualPath: a backslash, a leading '~'): the vfs decides. */
  if (memchr(name, '\\', length) || name[0] == '~') return 0;
  if (contains(set, hash_of(name, length))) return 0;
  *out = set->grant;
  return 1;
}

int names_holds(dir_names *names, uint64_t nodeid) {
  dir_set *set = held(names, nodeid);
  return set && set->expires_ns > now_ns();
}

int names_publish(dir_names *names, uint64_t nodeid, const uint8_t *list, size_t length, uint32_t count, uint32_t ttl_ms,
                  const uint8_t *negative, int32_t epoch) {
  if (nodeid == 0 || ttl_ms == 0 || count > DIR_NAMES_MAX || names->pending != 0 || *names->epoch != epoch) return 0;
  dir_set *set = &names->dirs[nodeid & names->mask];
  drop_set(set);
  /* Room for half as many names again to be made, within the bound. */
  uint32_t room = count + count / 2;
  if (!make_room(set, room < DIR_NAMES_MAX ? room : DIR_NAMES_MAX)) return 0;
  const uint8_t *end = list + length;
  for (uint32_t i = 0; i < count; i++) {
    long n = name_length(list, end);
    if (n < 0) {
      drop_set(set);
      return 0;
    }
    insert(set, hash_of(list, (size_t)n));
    list += n + 1;
  }
  set->nodeid = nodeid;
  set->expires_ns = now_ns() + (int64_t)ttl_ms * 1000000;
  memcpy(names->negative, negative, ENTRY_OUT_SIZE);
  return 1;
}
