// A model FUSE server for scripts/bench/transport-models.mjs: what a request costs on each
// way of serving /dev/fuse, with nothing else in the way. One flat in-memory directory;
// CREATE and UNLINK can be given busy time, standing in for the work backendfs's vfs does
// in JavaScript for them; every reply read from the device can be held back, standing in for
// a slower way from the read to the answer. Not part of backendfs: it only measures transports.
//
// usage: model-server MOUNTPOINT MODEL [WORK_US [REPLY_US]]
//   read           one thread, blocking read(2) on /dev/fuse
//   spin           one thread, non-blocking reads, 50 us of spinning before it blocks
//                  (backendfs's raw transport's event loop, src/fuse/raw/device-reader.ts)
//   uring-one      one thread owning every CPU's FUSE-over-io_uring queue, spinning 50 us
//                  on the completion ring before it blocks
//   uring-per-cpu  a thread per CPU queue, pinned to its CPU, blocking in io_uring_enter
//                  (libfuse's model: a request is answered on its caller's CPU)
// The io_uring models need /sys/module/fuse/parameters/enable_uring = Y.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

// FUSE-over-io_uring's ABI (Linux 6.14+), absent from older <linux/fuse.h>.
#define FUSE_OVER_IO_URING_FLAGS2 (1u << 9) /* FUSE_OVER_IO_URING, bit 41 of the init flags */
struct uring_ent_in_out { uint64_t flags, commit_id; uint32_t payload_sz, padding; uint64_t reserved; };
struct uring_req_header { char in_out[128]; char op_in[128]; struct uring_ent_in_out ent; };
struct uring_cmd_req { uint64_t flags, commit_id; uint16_t qid; uint8_t padding[6]; };
enum { URING_CMD_REGISTER = 1, URING_CMD_COMMIT_AND_FETCH = 2 };

#define MAX_WRITE (1 << 20)
#define BUFFER_SIZE (MAX_WRITE + 4096)
#define SPIN_NS 50000
#define NO_REPLY 1 /* handle()'s answer for requests that take none (FORGET) */

static int fuse_fd;
static int work_us;
static int reply_us;
static const char *model;

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000ull + t.tv_nsec;
}
static void busy(int us) {
  for (uint64_t end = now_ns() + us * 1000ull; us > 0 && now_ns() < end;) {}
}
static void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// ---- the file system: the root (nodeid 1) and its files, nodeid = slot

#define SLOTS 65536
enum { EMPTY, USED, DELETED };
static struct { char name[64]; uint64_t size; int state; } files[SLOTS];
static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t mount_time;

/** The slot holding `name`, or minus a free slot for it (0: full). */
static int slot_of(const char *name) {
  unsigned hash = 5381, free_slot = 0;
  for (const char *p = name; *p; p++) hash = hash * 33 + (unsigned char)*p;
  for (unsigned i = 0; i < SLOTS - 2; i++) {
    unsigned k = (hash + i) % (SLOTS - 2) + 2;
    if (files[k].state == USED && !strcmp(files[k].name, name)) return k;
    if (files[k].state != USED && !free_slot) free_slot = k;
    if (files[k].state == EMPTY) break;
  }
  return -(int)free_slot;
}
static void fill_attr(struct fuse_attr *a, uint64_t ino) {
  memset(a, 0, sizeof *a);
  a->ino = ino;
  a->atime = a->mtime = a->ctime = mount_time;
  a->blksize = 4096;
  a->nlink = ino == FUSE_ROOT_ID ? 2 : 1;
  a->mode = ino == FUSE_ROOT_ID ? S_IFDIR | 0755 : S_IFREG | 0644;
  a->size = ino == FUSE_ROOT_ID ? 4096 : files[ino].size;
  a->blocks = (a->size + 511) / 512;
}
static int entry_reply(char *out, uint64_t ino) {
  struct fuse_entry_out *e = (void *)out;
  memset(e, 0, sizeof *e);
  e->nodeid = ino;
  e->entry_valid = e->attr_valid = 1;
  fill_attr(&e->attr, ino);
  return sizeof *e;
}

/** Answers one request into `out` (which may be `payload`): its length, -errno, or NO_REPLY. */
static int handle(const struct fuse_in_header *h, const char *op_in, const char *payload, char *out) {
  switch (h->opcode) {
  case FUSE_INIT: {
    const struct fuse_init_in *in = (const void *)op_in;
    struct fuse_init_out *o = (void *)out;
    memset(o, 0, sizeof *o);
    o->major = FUSE_KERNEL_VERSION;
    o->minor = 41;
    o->max_readahead = in->max_readahead;
    o->flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_INIT_EXT | FUSE_MAX_PAGES;
    o->flags2 = strncmp(model, "uring", 5) ? 0 : FUSE_OVER_IO_URING_FLAGS2;
    o->max_background = 64;
    o->congestion_threshold = 48;
    o->max_write = MAX_WRITE;
    o->time_gran = 1;
    o->max_pages = MAX_WRITE / 4096;
    return sizeof *o;
  }
  case FUSE_LOOKUP: {
    int k = slot_of(payload);
    return k > 0 ? entry_reply(out, k) : -ENOENT;
  }
  case FUSE_GETATTR:
  case FUSE_SETATTR: {
    const struct fuse_setattr_in *in = (const void *)op_in;
    if (h->opcode == FUSE_SETATTR && (in->valid & FATTR_SIZE) && h->nodeid != FUSE_ROOT_ID) files[h->nodeid].size = in->size;
    struct fuse_attr_out *o = (void *)out;
    memset(o, 0, sizeof *o);
    o->attr_valid = 1;
    fill_attr(&o->attr, h->nodeid);
    return sizeof *o;
  }
  case FUSE_CREATE: {
    busy(work_us);
    int k = slot_of(payload);
    if (k == 0) return -ENOSPC;
    if (k < 0) {
      k = -k;
      snprintf(files[k].name, sizeof files[k].name, "%s", payload);
      files[k].state = USED;
    }
    files[k].size = 0;
    int n = entry_reply(out, k);
    struct fuse_open_out *o = (void *)(out + n);
    memset(o, 0, sizeof *o);
    o->fh = k;
    return n + sizeof *o;
  }
  case FUSE_OPEN:
  case FUSE_OPENDIR: {
    struct fuse_open_out *o = (void *)out;
    memset(o, 0, sizeof *o);
    o->fh = h->nodeid;
    return sizeof *o;
  }
  case FUSE_WRITE: {
    const struct fuse_write_in *in = (const void *)op_in;
    if (in->offset + in->size > files[h->nodeid].size) files[h->nodeid].size = in->offset + in->size;
    struct fuse_write_out *o = (void *)out;
    o->size = in->size;
    o->padding = 0;
    return sizeof *o;
  }
  case FUSE_READ: {
    const struct fuse_read_in *in = (const void *)op_in;
    uint64_t size = files[h->nodeid].size, n = in->offset < size ? size - in->offset : 0;
    if (n > in->size) n = in->size;
    memset(out, 'x', n);
    return n;
  }
  case FUSE_UNLINK: {
    busy(work_us);
    int k = slot_of(payload);
    if (k <= 0) return -ENOENT;
    files[k].state = DELETED;
    return 0;
  }
  case FUSE_FLUSH:
  case FUSE_RELEASE:
  case FUSE_RELEASEDIR:
  case FUSE_FSYNC:
  case FUSE_READDIR:
  case FUSE_DESTROY:
    return 0;
  case FUSE_FORGET:
  case FUSE_BATCH_FORGET:
  case FUSE_INTERRUPT:
    return NO_REPLY;
  default:
    return -ENOSYS;
  }
}
static int handle_locked(const struct fuse_in_header *h, const char *op_in, const char *payload, char *out) {
  pthread_mutex_lock(&files_lock);
  int n = handle(h, op_in, payload, out);
  pthread_mutex_unlock(&files_lock);
  return n;
}

// ---- /dev/fuse: a request is its header, its fixed-size argument, then the rest

static size_t op_in_size(uint32_t opcode) {
  switch (opcode) {
  case FUSE_INIT: return sizeof(struct fuse_init_in);
  case FUSE_GETATTR: return sizeof(struct fuse_getattr_in);
  case FUSE_SETATTR: return sizeof(struct fuse_setattr_in);
  case FUSE_CREATE: return sizeof(struct fuse_create_in);
  case FUSE_OPEN: case FUSE_OPENDIR: return sizeof(struct fuse_open_in);
  case FUSE_WRITE: return sizeof(struct fuse_write_in);
  case FUSE_READ: case FUSE_READDIR: return sizeof(struct fuse_read_in);
  case FUSE_FLUSH: return sizeof(struct fuse_flush_in);
  case FUSE_RELEASE: case FUSE_RELEASEDIR: return sizeof(struct fuse_release_in);
  case FUSE_FSYNC: return sizeof(struct fuse_fsync_in);
  default: return 0; /* LOOKUP, UNLINK: the name alone */
  }
}

/** Reads and answers one request: 0, or -errno of the read (EAGAIN, ENODEV at the end). */
static int serve_one(char *buf, char *out) {
  ssize_t n = read(fuse_fd, buf, BUFFER_SIZE);
  if (n < 0) return -errno;
  const struct fuse_in_header *h = (const void *)buf;
  const char *op_in = buf + sizeof *h;
  int r = handle_locked(h, op_in, op_in + op_in_size(h->opcode), out);
  if (r == NO_REPLY) return 0;
  busy(reply_us);
  struct fuse_out_header oh = { .len = sizeof oh + (r > 0 ? r : 0), .error = r < 0 ? r : 0, .unique = h->unique };
  struct iovec iov[2] = { { &oh, sizeof oh }, { out, r > 0 ? r : 0 } };
  if (writev(fuse_fd, iov, 2) < 0 && errno != ENOENT) return -errno;
  return 0;
}
static void *serve_blocking(void *unused) {
  (void)unused;
  char *buf = malloc(BUFFER_SIZE), *out = malloc(BUFFER_SIZE);
  for (int r = 0; r != -ENODEV && r != -EBADF && r != -ECONNABORTED;) r = serve_one(buf, out);
  return NULL;
}
static void serve_spinning(void) {
  char *buf = malloc(BUFFER_SIZE), *out = malloc(BUFFER_SIZE);
  fcntl(fuse_fd, F_SETFL, O_NONBLOCK);
  for (;;) {
    int r = serve_one(buf, out);
    for (uint64_t until = now_ns() + SPIN_NS; r == -EAGAIN && now_ns() < until;) r = serve_one(buf, out);
    if (r == -EAGAIN) {
      fcntl(fuse_fd, F_SETFL, 0);
      r = serve_one(buf, out);
      fcntl(fuse_fd, F_SETFL, O_NONBLOCK);
    }
    if (r == -ENODEV || r == -EBADF || r == -ECONNABORTED) return;
  }
}

// ---- FUSE over io_uring: each ring entry is a header buffer and a payload buffer

#define QUEUE_DEPTH 4
struct ring {
  int fd;
  unsigned *sq_tail, *sq_mask, *sq_array, *sq_flags, *cq_head, *cq_tail, *cq_mask;
  unsigned char *sqes;
  struct io_uring_cqe *cqes;
  unsigned unsubmitted;
};
struct entry {
  struct uring_req_header header;
  struct iovec iov[2];
  uint16_t qid;
  char payload[];
};

static int ring_init(struct ring *r) {
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  // 128-byte entries hold FUSE's command; task work runs when we enter, no interrupts.
  p.flags = IORING_SETUP_SQE128 | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SINGLE_ISSUER;
  r->fd = syscall(__NR_io_uring_setup, 64, &p);
  if (r->fd < 0) return -errno;
  size_t size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  if (p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe) > size) size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
  char *rings = mmap(0, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
  r->sqes = mmap(0, p.sq_entries * 128, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
  if (rings == MAP_FAILED || r->sqes == MAP_FAILED) return -ENOMEM;
  r->sq_tail = (void *)(rings + p.sq_off.tail);
  r->sq_mask = (void *)(rings + p.sq_off.ring_mask);
  r->sq_array = (void *)(rings + p.sq_off.array);
  r->sq_flags = (void *)(rings + p.sq_off.flags);
  r->cq_head = (void *)(rings + p.cq_off.head);
  r->cq_tail = (void *)(rings + p.cq_off.tail);
  r->cq_mask = (void *)(rings + p.cq_off.ring_mask);
  r->cqes = (void *)(rings + p.cq_off.cqes);
  r->unsubmitted = 0;
  return 0;
}
/** Queues a FUSE command for `e` (submitted at the next ring_enter). */
static void queue_command(struct ring *r, struct entry *e, uint32_t command, uint64_t commit_id) {
  unsigned tail = *r->sq_tail, index = tail & *r->sq_mask;
  struct io_uring_sqe *sqe = (void *)(r->sqes + index * 128);
  memset(sqe, 0, 128);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fuse_fd;
  sqe->cmd_op = command;
  sqe->user_data = (uintptr_t)e;
  if (command == URING_CMD_REGISTER) {
    sqe->addr = (uintptr_t)e->iov;
    sqe->len = 2;
  }
  struct uring_cmd_req *req = (void *)sqe->cmd;
  req->commit_id = commit_id;
  req->qid = e->qid;
  r->sq_array[index] = index;
  atomic_store_explicit((_Atomic unsigned *)r->sq_tail, tail + 1, memory_order_release);
  r->unsubmitted++;
}
/** Submits what is queued, runs pending task work, and waits for `wait` completions. */
static int ring_enter(struct ring *r, unsigned wait) {
  unsigned flags = wait || (*r->sq_flags & IORING_SQ_TASKRUN) ? IORING_ENTER_GETEVENTS : 0;
  if (!r->unsubmitted && !flags) return 0;
  int n = syscall(__NR_io_uring_enter, r->fd, r->unsubmitted, wait, flags, NULL, 0);
  if (n < 0) return -errno;
  r->unsubmitted -= (unsigned)n < r->unsubmitted ? (unsigned)n : r->unsubmitted;
  return n;
}
static int completions_waiting(struct ring *r) {
  return *r->cq_head != atomic_load_explicit((_Atomic unsigned *)r->cq_tail, memory_order_acquire);
}
/** Answers every request delivered, queueing each commit (and fetch of the next): how many, or -1 at the end. */
static int answer_completions(struct ring *r) {
  unsigned head = *r->cq_head, tail = atomic_load_explicit((_Atomic unsigned *)r->cq_tail, memory_order_acquire), n = 0;
  for (; head != tail; head++, n++) {
    struct io_uring_cqe *cqe = &r->cqes[head & *r->cq_mask];
    if (cqe->res < 0) {
      if (cqe->res != -ENOTCONN && cqe->res != -ECONNABORTED) fprintf(stderr, "model-server: ring entry failed: %s\n", strerror(-cqe->res));
      atomic_store_explicit((_Atomic unsigned *)r->cq_head, head + 1, memory_order_release);
      return -1;
    }
    struct entry *e = (void *)(uintptr_t)cqe->user_data;
    const struct fuse_in_header *h = (const void *)e->header.in_out;
    uint64_t unique = h->unique;
    int res = handle_locked(h, e->header.op_in, e->payload, e->payload);
    struct fuse_out_header *oh = (void *)e->header.in_out;
    oh->len = sizeof *oh + (res > 0 ? res : 0);
    oh->error = res < 0 ? res : 0;
    oh->unique = unique;
    e->header.ent.payload_sz = res > 0 ? res : 0;
    queue_command(r, e, URING_CMD_COMMIT_AND_FETCH, unique);
  }
  atomic_store_explicit((_Atomic unsigned *)r->cq_head, head, memory_order_release);
  return n;
}
struct queue_thread { int first_qid, queues, pin, spin; };
static void *serve_ring(void *arg) {
  struct queue_thread *q = arg;
  if (q->pin >= 0) pin_to(q->pin);
  struct ring r;
  int err = ring_init(&r);
  if (err) {
    fprintf(stderr, "model-server: io_uring_setup: %s\n", strerror(-err));
    exit(1);
  }
  for (int qid = q->first_qid; qid < q->first_qid + q->queues; qid++)
    for (int d = 0; d < QUEUE_DEPTH; d++) {
      struct entry *e = aligned_alloc(4096, sizeof(struct entry) + BUFFER_SIZE);
      memset(e, 0, sizeof *e);
      e->qid = qid;
      e->iov[0] = (struct iovec){ &e->header, sizeof e->header };
      e->iov[1] = (struct iovec){ e->payload, BUFFER_SIZE };
      queue_command(&r, e, URING_CMD_REGISTER, 0);
    }
  if ((err = ring_enter(&r, 0)) < 0) {
    fprintf(stderr, "model-server: FUSE_IO_URING_CMD_REGISTER: %s (is enable_uring on?)\n", strerror(-err));
    exit(1);
  }
  for (;;) {
    int answered = answer_completions(&r);
    if (answered < 0) return NULL;
    if (answered || r.unsubmitted) {
      ring_enter(&r, 0);
      continue;
    }
    for (uint64_t until = now_ns() + SPIN_NS; q->spin && !completions_waiting(&r) && now_ns() < until;)
      if (*r.sq_flags & IORING_SQ_TASKRUN) ring_enter(&r, 0);
    if (!completions_waiting(&r)) ring_enter(&r, 1);
  }
}

/** The kernel makes a queue per possible CPU, and a ring is ready once each has an entry. */
static int possible_cpus(void) {
  FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
  int first = 0, last = 0;
  if (f) {
    if (fscanf(f, "%d-%d", &first, &last) < 2) last = first;
    fclose(f);
  }
  return last + 1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: model-server MOUNTPOINT read|spin|uring-one|uring-per-cpu [WORK_US [REPLY_US]]\n");
    return 2;
  }
  model = argv[2];
  work_us = argc > 3 ? atoi(argv[3]) : 0;
  reply_us = argc > 4 ? atoi(argv[4]) : 0;
  mount_time = time(NULL);
  fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fuse_fd < 0) {
    perror("model-server: /dev/fuse");
    return 1;
  }
  char options[256];
  snprintf(options, sizeof options, "fd=%d,rootmode=40000,user_id=0,group_id=0,default_permissions", fuse_fd);
  if (mount("model", argv[1], "fuse.model", MS_NOSUID | MS_NODEV, options)) {
    perror("model-server: mount");
    return 1;
  }
  // INIT comes through the device whatever the model.
  char *buf = malloc(BUFFER_SIZE), *out = malloc(BUFFER_SIZE);
  if (serve_one(buf, out)) {
    fprintf(stderr, "model-server: no INIT\n");
    return 1;
  }
  fprintf(stderr, "model-server: mounted at %s (%s, %d us of work)\n", argv[1], model, work_us);
  int cpus = possible_cpus();
  if (!strcmp(model, "read")) serve_blocking(NULL);
  else if (!strcmp(model, "spin")) serve_spinning();
  else if (!strncmp(model, "uring", 5)) {
    // FORGETs and INTERRUPTs still come through the device.
    pthread_t device;
    pthread_create(&device, NULL, serve_blocking, NULL);
    if (!strcmp(model, "uring-one")) {
      struct queue_thread q = { 0, cpus, -1, 1 };
      serve_ring(&q);
    } else {
      pthread_t threads[cpus];
      struct queue_thread queues[cpus];
      for (int i = 0; i < cpus; i++) {
        queues[i] = (struct queue_thread){ i, 1, i, 0 };
        pthread_create(&threads[i], NULL, serve_ring, &queues[i]);
      }
      for (int i = 0; i < cpus; i++) pthread_join(threads[i], NULL);
    }
  } else {
    fprintf(stderr, "model-server: unknown model %s\n", model);
    return 2;
  }
  return 0;
}
