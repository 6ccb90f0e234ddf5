/*
 * Made files. A CREATE costs the JavaScript vfs tens of microseconds before its reply (its
 * checks, the route, the file's attributes), while the caller waits; a file made here is
 * answered in about the time of the disk's own create, and the vfs does its bookkeeping
 * after the reply.
 *
 * What keeps it right: the vfs decides where, and this file only repeats what its create
 * does there.
 *  - Only in a directory whose names the vfs holds (dir_names.c), of a name it lacks: the
 *    vfs would find the name missing and make a new file. The directory's grant says where
 *    on the disk, and with what group: the vfs gives one only where nothing else of its
 *    create applies (no access rules, a disk route with host files, passthrough on).
 *  - The file is made as the vfs's disk route makes a new one (host-file.ts, createInPlace):
 *    O_CREAT|O_EXCL|O_NOFOLLOW, read-only descriptor, the caller's owner (the directory's group
 *    in a set-group-ID one), the mode set again where the umask took bits. A name the disk
 *    has after all (O_EXCL) or any failure is left to JavaScript, with what was made removed.
 *  - Its attributes are those the vfs shows of a disk file (vfs.ts toStat, protocol.ts
 *    writeAttr): its inode tagged with bit 52 and its device, times through the same
 *    milliseconds, blocks of 512 bytes, blksize 4096.
 *  - The vfs hears of each file before it handles any later request (made_take, as kept
 *    opens), with the node id and handle it reserved for it.
 */
#include "made_files.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define OP_CREATE 35
/* fuse_create_in: flags, mode, umask, open_flags. */
#define CREATE_IN_SIZE 16
/* fuse_entry_out and fuse_open_out. */
#define ENTRY_SIZE 128
#define OPEN_OUT_SIZE 16

struct made_files {
  int32_t *pending;
  uint64_t ids[MADE_IDS_MAX][2];
  uint32_t id_count;
  made_file answered[MADE_ANSWERED_MAX];
  uint32_t answered_count;
};

made_files *made_new(int32_t *pending) {
  made_files *made = calloc(1, sizeof *made);
  if (made) made->pending = pending;
  return made;
}

void made_free(made_files *made) {
  if (!made) return;
  /* Answered and never taken (the mount is gone): the descriptors are ours to close. */
  for (uint32_t i = 0; i < made->answered_count; i++) close(made->answered[i].fd);
  free(made);
}

int made_reserve(made_files *made, uint64_t nodeid, uint64_t fh) {
  if (made->id_count >= MADE_IDS_MAX) return 0;
  made->ids[made->id_count][0] = nodeid;
  made->ids[made->id_count][1] = fh;
  made->id_count++;
  return 1;
}

uint32_t made_reserved(const made_files *made) {
  return made->id_count;
}

static void put_u64(uint8_t *at, uint64_t v) {
  memcpy(at, &v, 8);
}

static void put_u32(uint8_t *at, uint32_t v) {
  memcpy(at, &v, 4);
}

/* A time as the vfs has it (milliseconds in a double, as Node's Stats), then as writeTime writes it. */
static void put_time(uint8_t *sec_at, uint8_t *nsec_at, struct timespec t) {
  double ms = (double)t.tv_sec * 1000 + (double)t.tv_nsec / 1e6;
  double sec = floor(ms / 1000);
  double nsec = round((ms - sec * 1000) * 1e6);
  put_u64(sec_at, (uint64_t)sec);
  put_u32(nsec_at, nsec > 999999999 ? 999999999 : (uint32_t)nsec);
}

/* fuse_entry_out of the new file (protocol.ts writeEntryOut with vfs.ts toStat of a disk file). */
static void put_entry(uint8_t *out, uint64_t nodeid, const struct stat *st, uint32_t ttl_ms) {
  memset(out, 0, ENTRY_SIZE);
  put_u64(out, nodeid);
  put_u64(out + 16, ttl_ms / 1000);
  put_u64(out + 24, ttl_ms / 1000);
  put_u32(out + 32, (ttl_ms % 1000) * 1000000);
  put_u32(out + 36, (ttl_ms % 1000) * 1000000);
  uint8_t *attr = out + 40;
  /* shownIno: bit 52, the device's low 20 bits, the inode's low 32. */
  put_u64(attr, (1ull << 52) + (((uint64_t)st->st_dev % (1ull << 20)) << 32) + ((uint64_t)st->st_ino % (1ull << 32)));
  put_u64(attr + 8, (uint64_t)st->st_size);
  put_u64(attr + 16, ((uint64_t)st->st_size + 511) / 512);
  put_time(attr + 24, attr + 48, st->st_atim);
  put_time(attr + 32, attr + 52, st->st_mtim);
  put_time(attr + 40, attr + 56, st->st_ctim);
  put_u32(attr + 60, S_IFREG | (st->st_mode & 07777));
  put_u32(attr + 64, (uint32_t)st->st_nlink);
  put_u32(attr + 68, st->st_uid);
  put_u32(attr + 72, st->st_gid);
  put_u32(attr + 76, 0);
  put_u32(attr + 80, 4096);
}

/* The new file, as createInPlace makes it; -1 (nothing left behind) when it cannot be. */
static int make_file(const made_grant *grant, const char *name, uint32_t mode, uint32_t uid, uint32_t gid) {
  int file = openat(grant->dirfd, name, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (file < 0) return -1;
  int own = uid != geteuid() || gid != getegid();
  if (own || grant->umask < 0 || (mode & (uint32_t)grant->umask) != 0) {
    /* The owner first: chown clears the set-id bits that the chmod then restores. */
    if ((own && fchown(file, uid, gid) < 0) || fchmod(file, mode) < 0) {
      close(file);
      unlinkat(grant->dirfd, name, 0);
      return -1;
    }
  }
  return file;
}

int made_answer(made_files *made, dir_names *names, int fd, const uint8_t *request, size_t length, int64_t *made_at_ms) {
  if (length < IN_HEADER_SIZE + CREATE_IN_SIZE || u32_at(request + 4) != OP_CREATE) return 0;
  if (made->id_count == 0 || made->answered_count >= MADE_ANSWERED_MAX) return 0;
  uint64_t dir = u64_at(request + 16);
  const uint8_t *body = request + IN_HEADER_SIZE;
  const uint8_t *name = body + CREATE_IN_SIZE;
  const uint8_t *nul = memchr(name, 0, length - IN_HEADER_SIZE - CREATE_IN_SIZE);
  if (!nul) return 0;
  size_t name_length = (size_t)(nul - name);
  made_grant grant;
  if (!names_granted(names, dir, name, name_length, &grant)) return 0;

  made_file *made_one = &made->answered[made->answered_count];
  memcpy(made_one->name, name, name_length + 1);
  uint32_t mode = u32_at(body + 4) & 07777;
  uint32_t caller_uid = u32_at(request + 24), caller_gid = u32_at(request + 28);
  uint32_t gid = grant.gid >= 0 ? (uint32_t)grant.gid : caller_gid;
  int file = make_file(&grant, made_one->name, mode, caller_uid, gid);
  if (file < 0) return 0;
  struct stat st;
  struct backing_map map = {.fd = file, .flags = 0, .padding = 0};
  int backing_id = fstat(file, &st) == 0 ? ioctl(fd, DEV_IOC_BACKING_OPEN, &map) : -1;
  if (backing_id < 0) {
    close(file);
    unlinkat(grant.dirfd, made_one->name, 0);
    return 0;
  }

  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  made_one->made_at_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
  *made_at_ms = made_one->made_at_ms;
  made->id_count--;
  uint64_t nodeid = made->ids[made->id_count][0], fh = made->ids[made->id_count][1];
  uint8_t header[OUT_HEADER_SIZE], entry[ENTRY_SIZE], open_out[OPEN_OUT_SIZE];
  put_u32(header, OUT_HEADER_SIZE + ENTRY_SIZE + OPEN_OUT_SIZE);
  put_u32(header + 4, 0);
  memcpy(header + 8, request + 8, 8); /* unique */
  put_entry(entry, nodeid, &st, grant.ttl_ms);
  put_u64(open_out, fh);
  put_u32(open_out + 8, grant.open_flags);
  put_u32(open_out + 12, (uint32_t)backing_id);
  struct iovec parts[3] = {{header, OUT_HEADER_SIZE}, {entry, ENTRY_SIZE}, {open_out, OPEN_OUT_SIZE}};
  /* ENOENT: the request was interrupted meanwhile; the file is made all the same, and the vfs takes it. */
  while (writev(fd, parts, 3) < 0 && errno == EINTR) {}

  made_one->dir = dir;
  made_one->nodeid = nodeid;
  made_one->fh = fh;
  made_one->fd = file;
  made_one->backing_id = backing_id;
  made_one->name_length = (uint32_t)name_length;
  made->answered_count++;
  *made->pending = (int32_t)made->answered_count;
  return 1;
}

uint32_t made_take(made_files *made, made_file *out, uint32_t max) {
  uint32_t n = made->answered_count < max ? made->answered_count : max;
  memcpy(out, made->answered, n * sizeof *out);
  memmove(made->answered, made->answered + n, (made->answered_count - n) * sizeof *out);
  made->answered_count -= n;
  *made->pending = (int32_t)made->answered_count;
  return n;
}
