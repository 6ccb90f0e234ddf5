/*
 * The attribute mirror: GETATTR replies the JS vfs published, answered on the loop's thread
 * without entering JavaScript (see attr_mirror.c for the rules that keep it right).
 */
#ifndef BACKENDFS_ATTR_MIRROR_H
#define BACKENDFS_ATTR_MIRROR_H

#include <stddef.h>
#include <stdint.h>

/* fuse_attr_out: attr_valid, attr_valid_nsec, dummy, fuse_attr (88 bytes). */
#define ATTR_OUT_SIZE 104

typedef struct attr_mirror attr_mirror;

/*
 * `shared` is the JS side's Int32Array: [0] the epoch (moved by every drop, so that a
 * publish computed before a change of its node is refused).
 */
attr_mirror *mirror_new(uint32_t slots, int32_t *shared);
void mirror_free(attr_mirror *mirror);

/* A request was read: forget what it may change, before anything later is answered. */
void mirror_arrived(attr_mirror *mirror, const uint8_t *request, size_t length);
/* 1 when the request (a GETATTR of a node held) was answered on `fd`, else 0. */
int mirror_answer(attr_mirror *mirror, int fd, const uint8_t *request, size_t length);
/* A request was answered by JS: the same forgetting as at its arrival. */
void mirror_settled(attr_mirror *mirror, uint32_t opcode, uint64_t nodeid, uint32_t open_flags);

/* Keeps a node's reply for ttl_ms unless the node was dropped since `epoch`; 1 when kept. */
int mirror_publish(attr_mirror *mirror, uint64_t nodeid, const uint8_t *attr_out, uint32_t ttl_ms, int32_t epoch);
void mirror_drop(attr_mirror *mirror, uint64_t nodeid);

/* The reply held for `nodeid` (and when it expires) into attr_out; 1 when one is held. */
int mirror_peek(attr_mirror *mirror, uint64_t nodeid, uint8_t *attr_out, int64_t *expires_ns);
/*
 * A directory's entries changed at `at_ms` (wall clock, whole milliseconds, as Date.now()),
 * by a request answered here: `before`, its reply held until that request, is held again
 * until `expires_ns` with its mtime and ctime raised to at_ms, which is what the vfs answers
 * once it hears of the change (vfs.ts toStat, entriesChanged).
 */
void mirror_entries_changed(attr_mirror *mirror, uint64_t nodeid, const uint8_t *before, int64_t expires_ns, int64_t at_ms);
void mirror_clear(attr_mirror *mirror);

#endif
