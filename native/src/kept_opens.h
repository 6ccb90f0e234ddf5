/*
 * Kept opens: the OPEN of a file the vfs keeps for its next reader (a disk file in FUSE
 * passthrough whose last handle closed), answered here with the handle and backing id the
 * vfs published for it. The vfs hears of every answer before it handles anything else and
 * takes the file as its own open would have (see kept_opens.c).
 */
#ifndef BACKENDFS_KEPT_OPENS_H
#define BACKENDFS_KEPT_OPENS_H

#include <stddef.h>
#include <stdint.h>

/* Answers held at most between two takes (a read burst answers no more: see device_read). */
#define KEPT_ANSWERED_MAX 256

typedef struct kept_opens kept_opens;

/* `pending`: where the number of answers not yet taken is kept (a JS Int32Array's element). */
kept_opens *kept_new(uint32_t slots, int32_t *pending);
void kept_free(kept_opens *kept);

/* The next read-only OPEN of `nodeid` within ttl_ms is answered with fh, open_flags and backing_id. */
void kept_publish(kept_opens *kept, uint64_t nodeid, uint64_t fh, uint32_t open_flags, int32_t backing_id, uint32_t ttl_ms);
/* Forgets the publication of `nodeid` with handle `fh` (none other). */
void kept_unpublish(kept_opens *kept, uint64_t nodeid, uint64_t fh);
/* 1 when the request (a read-only OPEN of a published node) was answered on `fd`, else 0. */
int kept_answer(kept_opens *kept, int fd, const uint8_t *request, size_t length);
/* Moves the answers not yet taken into out (node id, handle pairs); returns how many pairs. */
uint32_t kept_take_answered(kept_opens *kept, uint64_t *out, uint32_t max_pairs);

#endif
