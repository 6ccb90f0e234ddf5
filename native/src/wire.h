/*
 * What the addon's answering code shares: a request's fields read where they lie (requests
 * are not aligned for them), the clock its lifetimes are counted on, the size of its
 * direct-mapped tables, and the kernel's passthrough registration.
 */
#ifndef BACKENDFS_WIRE_H
#define BACKENDFS_WIRE_H

#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

/* fuse_in_header and fuse_out_header. */
#define IN_HEADER_SIZE 40
#define OUT_HEADER_SIZE 16
/* fuse_open_in.flags: the access mode bits and O_TRUNC. */
#define O_ACCMODE_BITS 3
#define O_TRUNC_BIT 01000

/* linux/fuse.h (7.40+), spelled out so that the build needs no kernel headers of that age. */
struct backing_map {
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
#define DEV_IOC_MAGIC 229
#define DEV_IOC_BACKING_OPEN _IOW(DEV_IOC_MAGIC, 1, struct backing_map)
#define DEV_IOC_BACKING_CLOSE _IOW(DEV_IOC_MAGIC, 2, uint32_t)

static inline int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline uint64_t u64_at(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline uint32_t u32_at(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* A table of at least `slots` slots, indexed by node id & (size - 1): the power of two, at most 2^24. */
static inline uint32_t table_size(uint32_t slots) {
  uint32_t size = 1;
  while (size < slots && size < (1u << 24)) size <<= 1;
  return size;
}

#endif
