/*
 * Made files: the CREATE of a new name in a directory the vfs granted (dir_names.h), answered
 * in the addon: the file made on the disk as the vfs's own create makes it, registered for
 * FUSE passthrough, and answered with a node id and handle the vfs reserved. The vfs hears of
 * every such file before it handles anything else and takes it as its own create would have
 * made it (see made_files.c).
 */
#ifndef BACKENDFS_MADE_FILES_H
#define BACKENDFS_MADE_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "dir_names.h"

/* Files answered at most between two takes; node ids and handles reserved at most. */
#define MADE_ANSWERED_MAX 256
#define MADE_IDS_MAX 256

typedef struct {
  uint64_t dir;
  uint64_t nodeid;
  uint64_t fh;
  int32_t fd;
  int32_t backing_id;
  uint32_t name_length;
  /* When it was made (wall clock, whole milliseconds): its directory's entries changed then. */
  int64_t made_at_ms;
  char name[256];
} made_file;

typedef struct made_files made_files;

/* `pending`: where the number of files answered and not yet taken is kept (a JS Int32Array's element). */
made_files *made_new(int32_t *pending);
void made_free(made_files *made);

/* A node id and a handle the vfs reserved for the next file made here; 0 when there are enough. */
int made_reserve(made_files *made, uint64_t nodeid, uint64_t fh);
/* How many reserved pairs are left. */
uint32_t made_reserved(const made_files *made);
/*
 * 1 when the request (a CREATE in a granted directory, of a name it lacks) was answered on
 * `fd` (/dev/fuse), else 0: anything unexpected (the name taken on the disk, no reserved ids,
 * a failed chown or registration) leaves it to JS with nothing changed.
 */
int made_answer(made_files *made, dir_names *names, int fd, const uint8_t *request, size_t length, int64_t *made_at_ms);
/* Moves up to `max` files answered and not yet taken into out; returns how many. */
uint32_t made_take(made_files *made, made_file *out, uint32_t max);

#endif
