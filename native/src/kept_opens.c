/*
 * Kept opens (kept_opens.h). The vfs decides everything: it publishes a file it keeps for
 * its next reader (idle-hosts.ts) with a handle number it reserved and the backing id the
 * transport registered for the file, for no longer than its own cached attributes of the
 * path are valid (an open in JS would not look at the disk again before then either), and
 * unpublishes it the moment it lets the file go or takes it for an open of its own.
 *
 * What keeps it right:
 *  - Only a read-only OPEN without O_TRUNC is answered; a publication answers one OPEN and
 *    is gone (the next reader of an open file joins it in JS).
 *  - Every answer is recorded, and the JS side takes the records right after the read call
 *    that made them, before it handles the request that call returned: the vfs adopts each
 *    file exactly as its own open would have, at the place in the request order where the
 *    kernel put that OPEN. Nothing else can run in between: this only runs on the event
 *    loop's thread, inside the device read JS called.
 *  - An answer that cannot be written (the request was interrupted meanwhile) is not
 *    recorded: the kernel has no such open, and the vfs still keeps the file.
 *
 * Direct-mapped by node id, as the attribute mirror: a publication that collides with
 * another node's replaces it (that node's next open simply goes to JS).
 */
#include "kept_opens.h"
#include "wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OP_OPEN 14
/* fuse_open_out: fh, open_flags, backing_id. */
#define OPEN_OUT_SIZE 16

typedef struct {
  uint64_t nodeid;
  /* 0: nothing published (the vfs's handles start at 1). */
  uint64_t fh;
  int64_t expires_ns;
  uint32_t open_flags;
  int32_t backing_id;
} kept_slot;

struct kept_opens {
  kept_slot *slots;
  uint32_t mask;
  uint64_t answered[KEPT_ANSWERED_MAX][2];
  int32_t *pending;
};

kept_opens *kept_new(uint32_t slots, int32_t *pending) {
  uint32_t size = table_size(slots);
  kept_opens *kept = calloc(1, sizeof *kept);
  if (!kept) return NULL;
  kept->slots = calloc(size, sizeof(kept_slot));
  if (!kept->slots) {
    free(kept);
    return NULL;
  }
  kept->mask = size - 1;
  kept->pending = pending;
  *pending = 0;
  return kept;
}

void kept_free(kept_opens *kept) {
  if (!kept) return;
  free(kept->slots);
  free(kept);
}

void kept_publish(kept_opens *kept, uint64_t nodeid, uint64_t fh, uint32_t open_flags, int32_t backing_id, uint32_t ttl_ms) {
  if (fh == 0 || ttl_ms == 0) return;
  kept_slot *s = &kept->slots[nodeid & kept->mask];
  s->nodeid = nodeid;
  s->fh = fh;
  s->open_flags = open_flags;
  s->backing_id = backing_id;
  s->expires_ns = now_ns() + (int64_t)ttl_ms * 1000000;
}

void kept_unpublish(kept_opens *kept, uint64_t nodeid, uint64_t fh) {
  kept_slot *s = &kept->slots[nodeid & kept->mask];
  if (s->nodeid == nodeid && s->fh == fh) s->fh = 0;
}

int kept_answer(kept_opens *kept, int fd, const uint8_t *request, size_t length) {
  if (length < IN_HEADER_SIZE + 8 || u32_at(request + 4) != OP_OPEN) return 0;
  uint32_t count = (uint32_t)*kept->pending;
  if (count >= KEPT_ANSWERED_MAX) return 0;
  if ((u32_at(request + IN_HEADER_SIZE) & (O_ACCMODE_BITS | O_TRUNC_BIT)) != 0) return 0;
  uint64_t nodeid = u64_at(request + 16);
  kept_slot *s = &kept->slots[nodeid & kept->mask];
  if (s->nodeid != nodeid || s->fh == 0) return 0;
  uint64_t fh = s->fh;
  s->fh = 0;
  if (s->expires_ns <= now_ns()) return 0;
  uint8_t reply[OUT_HEADER_SIZE + OPEN_OUT_SIZE];
  uint32_t total = sizeof reply;
  int32_t error = 0;
  memcpy(reply, &total, 4);
  memcpy(reply + 4, &error, 4);
  memcpy(reply + 8, request + 8, 8); /* unique */
  memcpy(reply + 16, &fh, 8);
  memcpy(reply + 24, &s->open_flags, 4);
  memcpy(reply + 28, &s->backing_id, 4);
  ssize_t n;
  do n = write(fd, reply, sizeof reply);
  while (n < 0 && errno == EINTR);
  /* Not written (interrupted: ENOENT): no open exists, the vfs still keeps the file; the request was answered all the same. */
  if (n < 0) return 1;
  kept->answered[count][0] = nodeid;
  kept->answered[count][1] = fh;
  *kept->pending = (int32_t)(count + 1);
  return 1;
}

uint32_t kept_take_answered(kept_opens *kept, uint64_t *out, uint32_t max_pairs) {
  uint32_t count = (uint32_t)*kept->pending;
  if (count > max_pairs) count = max_pairs;
  memcpy(out, kept->answered, (size_t)count * 2 * sizeof(uint64_t));
  uint32_t left = (uint32_t)*kept->pending - count;
  memmove(kept->answered, kept->answered + count, (size_t)left * 2 * sizeof(uint64_t));
  *kept->pending = (int32_t)left;
  return count;
}
