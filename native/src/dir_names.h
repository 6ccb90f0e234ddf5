/*
 * Directory names: per directory the vfs listed, the names it holds (and every name made in
 * it since), so that the LOOKUP of any other name is answered "no such entry" here, without
 * entering JavaScript (see dir_names.c for the rules that keep it right).
 */
#ifndef BACKENDFS_DIR_NAMES_H
#define BACKENDFS_DIR_NAMES_H

#include <stddef.h>
#include <stdint.h>

/* fuse_entry_out: nodeid, generation, entry and attribute validity, fuse_attr (88 bytes). */
#define ENTRY_OUT_SIZE 128
/* Names one directory may hold here; a larger one is left to JavaScript. */
#define DIR_NAMES_MAX 16384

typedef struct dir_names dir_names;

/* `epoch`: a JS Int32Array's element, moved by every request that may make a name (and every clear). */
dir_names *names_new(uint32_t dirs, int32_t *epoch);
void names_free(dir_names *names);

/* A request was read: names it makes are added to their directory before anything later is answered. */
void names_arrived(dir_names *names, const uint8_t *request, size_t length);
/* A request was answered by JS. */
void names_settled(dir_names *names, uint32_t opcode);
/* 1 when the request (a LOOKUP of a name its directory does not hold) was answered on `fd`, else 0. */
int names_answer(dir_names *names, int fd, const uint8_t *request, size_t length);

/*
 * `list`: the directory's names, each followed by a NUL, `count` of them; held for ttl_ms
 * unless a request that may make a name was read since `epoch` or is still unanswered.
 * `negative`: the fuse_entry_out a miss is answered with. 1 when held.
 */
int names_publish(dir_names *names, uint64_t nodeid, const uint8_t *list, size_t length, uint32_t count, uint32_t ttl_ms,
                  const uint8_t *negative, int32_t epoch);
/* Whether the names of `nodeid` are held (and not expired). */
int names_holds(dir_names *names, uint64_t nodeid);
/*
 * A grant: new files in a held directory may be made by the addon itself (made_files.c), in
 * the host directory the vfs named, as its own create would make them. It lives as long as
 * the directory's names are held, and a SETATTR of the directory ends it (its group and
 * set-group-ID bit decide a new file's group).
 */
typedef struct {
  int dirfd;
  /* The group of every new file (a set-group-ID directory's), or -1: the caller's. */
  int32_t gid;
  /* The daemon's umask, or -1 when unknown (the mode is then always set again). */
  int32_t umask;
  /* How long the kernel may keep the new entry and its attributes. */
  uint32_t ttl_ms;
  /* fuse_open_out.open_flags of the new file's handle. */
  uint32_t open_flags;
} made_grant;

/* Grants creates in held directory `nodeid` (host_dir opened here; closed when the grant ends). 1 when granted. */
int names_grant(dir_names *names, uint64_t nodeid, const char *host_dir, int32_t gid, int32_t umask, uint32_t ttl_ms, uint32_t open_flags);
/* 1 when `nodeid` is held, fresh and granted. */
int names_is_granted(dir_names *names, uint64_t nodeid);
/* 1, with the grant in *out, when `nodeid` is held, fresh and granted and lacks `name` (a name the addon answers lookups of). */
int names_granted(dir_names *names, uint64_t nodeid, const uint8_t *name, size_t length, made_grant *out);

/* Forgets the names of `nodeid` (something changed in it elsewhere), as names_clear does all. */
void names_drop(dir_names *names, uint64_t nodeid);
void names_clear(dir_names *names);

#endif
