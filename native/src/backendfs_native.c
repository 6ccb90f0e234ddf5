/*
 * What the raw /dev/fuse transport cannot do from JavaScript (see src/fuse/raw/native.ts):
 *
 *  - wait for requests on the event loop itself: /dev/fuse opened O_NONBLOCK, watched with
 *    uv_poll, read until EAGAIN. A request then costs one thread wake-up (the loop's), where
 *    a reader thread costs two: on a VM that parks idle vCPUs each one is tens of microseconds.
 *  - FUSE passthrough: register an open file with the kernel (FUSE_DEV_IOC_BACKING_OPEN) so
 *    that reads and writes of a file opened through the mount go straight to it.
 *  - inotify, for a disk route's change feed (src/backends/disk-watch.ts): Node has no
 *    binding of it (fs.watch gives neither the watch of each directory nor overflows).
 *  - answer a GETATTR without entering JavaScript, from the replies the vfs published
 *    (attr_mirror.c): read, answer, read the next, until a request needs the vfs; the OPEN
 *    of a file the vfs keeps for its next reader (kept_opens.c); the LOOKUP of a name
 *    that a directory the vfs listed does not hold (dir_names.c); and the CREATE of such a
 *    name where the vfs granted it (made_files.c).
 *
 * Everything is synchronous and runs on the loop's thread; no semantics live here.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <node_api.h>
#include <uv.h>

#include "attr_mirror.h"
#include "dir_names.h"
#include "kept_opens.h"
#include "made_files.h"
#include "wire.h"

#define CHECK(env, call)                                        \
  do {                                                          \
    if ((call) != napi_ok) {                                    \
      napi_throw_error((env), NULL, "backendfs native: " #call); \
      return NULL;                                              \
    }                                                           \
  } while (0)

/* The call's first n arguments as argv[0..n-1] (argc: how many were given). */
#define ARGS(n)                                                        \
  size_t argc = (n);                                                   \
  napi_value argv[(n)];                                                \
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL))

static napi_value throw_errno(napi_env env, const char *what, int err) {
  char message[160];
  snprintf(message, sizeof message, "%s: %s", what, strerror(err));
  napi_value code, msg, error;
  const char *name = err == EPERM ? "EPERM" : err == EINVAL ? "EINVAL" : err == EBADF ? "EBADF" : err == ENOTTY ? "ENOTTY" : err == EBUSY ? "EBUSY" : "EIO";
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
  napi_create_error(env, code, msg, &error);
  napi_value errno_value;
  napi_create_int32(env, -err, &errno_value);
  napi_set_named_property(env, error, "errno", errno_value);
  napi_throw(env, error);
  return NULL;
}

static int32_t int_arg(napi_env env, napi_value value) {
  int32_t out = -1;
  napi_get_value_int32(env, value, &out);
  return out;
}

/* FUSE_CREATE. */
#define OP_CREATE_CODE 35

/* GETATTRs answered in one read() call at most, before the loop gets a turn (the poll fires again). */
#define ANSWER_BURST 256

/* Directories whose names are held at most (dir_names.c). */
#define NAMES_DIRS 256

/* A mirror, its kept opens, directory names and made files, and a reference to the typed array they write into, which must live as long. */
typedef struct {
  attr_mirror *mirror;
  kept_opens *kept;
  dir_names *names;
  made_files *made;
  napi_ref shared;
} mirror_handle;

static mirror_handle *handle_arg(napi_env env, napi_value value) {
  napi_valuetype type;
  void *handle = NULL;
  if (napi_typeof(env, value, &type) != napi_ok || type != napi_external) return NULL;
  if (napi_get_value_external(env, value, &handle) != napi_ok || !handle) return NULL;
  return handle;
}

static attr_mirror *mirror_arg(napi_env env, napi_value value) {
  mirror_handle *handle = handle_arg(env, value);
  return handle ? handle->mirror : NULL;
}

static kept_opens *kept_arg(napi_env env, napi_value value) {
  mirror_handle *handle = handle_arg(env, value);
  return handle ? handle->kept : NULL;
}

static dir_names *names_arg(napi_env env, napi_value value) {
  mirror_handle *handle = handle_arg(env, value);
  return handle ? handle->names : NULL;
}

static made_files *made_arg(napi_env env, napi_value value) {
  mirror_handle *handle = handle_arg(env, value);
  return handle ? handle->made : NULL;
}

/*
 * The kernel does not wait for the reply to a RELEASE or RELEASEDIR (it sends them in the
 * background and ignores their errors), but the daemon must still write one: written here at
 * once, the JS side only does the closing (and writes nothing back).
 */
static void acknowledge_release(int fd, const uint8_t *request, size_t length) {
  uint32_t opcode;
  if (length < 40) return;
  memcpy(&opcode, request + 4, 4);
  if (opcode != 18 /* RELEASE */ && opcode != 29 /* RELEASEDIR */) return;
  uint8_t header[16];
  uint32_t total = sizeof header;
  int32_t error = 0;
  memcpy(header, &total, 4);
  memcpy(header + 4, &error, 4);
  memcpy(header + 8, request + 8, 8); /* unique */
  while (write(fd, header, sizeof header) < 0 && errno == EINTR) {}
}

/*
 * Reads requests into data until one needs JS, answering on the way those the mirror, its
 * kept opens and its directory names can (at most `most`): that request's length, or -errno
 * (-EAGAIN also once `most` were answered). *answered counts the requests answered here.
 * RELEASE and RELEASEDIR are acknowledged before they are returned (acknowledge_release).
 */
static int32_t read_request(int fd, uint8_t *data, size_t length, mirror_handle *handle, int most, int *answered) {
  *answered = 0;
  for (;;) {
    ssize_t n;
    do n = read(fd, data, length);
    while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    if (!handle) return (int32_t)n;
    /* A CREATE the addon may answer: its directory's reply, to be held again with the new times (made_files.c). */
    uint8_t dir_attr[ATTR_OUT_SIZE];
    int64_t dir_expires = 0, made_at_ms = 0;
    int dir_held = handle->made && n >= IN_HEADER_SIZE && u32_at(data + 4) == OP_CREATE_CODE &&
                   mirror_peek(handle->mirror, u64_at(data + 16), dir_attr, &dir_expires);
    mirror_arrived(handle->mirror, data, (size_t)n);
    if (handle->made && made_answer(handle->made, handle->names, fd, data, (size_t)n, &made_at_ms)) {
      /* Its name is held from now on, and it is answered: nothing pending. */
      names_arrived(handle->names, data, (size_t)n);
      names_settled(handle->names, u32_at(data + 4));
      /* The kernel asks for the directory next (its permissions, before the next create in it). */
      if (dir_held) mirror_entries_changed(handle->mirror, u64_at(data + 16), dir_attr, dir_expires, made_at_ms);
      if (++*answered == most) return -EAGAIN;
      continue;
    }
    if (handle->names) names_arrived(handle->names, data, (size_t)n);
    if (!mirror_answer(handle->mirror, fd, data, (size_t)n) && !(handle->kept && kept_answer(handle->kept, fd, data, (size_t)n)) &&
        !(handle->names && names_answer(handle->names, fd, data, (size_t)n))) {
      acknowledge_release(fd, data, (size_t)n);
      return (int32_t)n;
    }
    if (++*answered == most) return -EAGAIN;
  }
}

/*
 * read(fd, buffer, mirror?) -> bytes of the next request JS is to handle, or -errno (EAGAIN:
 * nothing waiting; ENODEV: unmounted). With a mirror, the requests it and its kept opens
 * answer are answered here and never returned (the kept opens answered are then taken with
 * keptTakeAnswered before anything else), and RELEASE and RELEASEDIR are acknowledged here
 * before they are returned (acknowledge_release).
 */
static napi_value device_read(napi_env env, napi_callback_info info) {
  ARGS(3);
  void *data;
  size_t length;
  CHECK(env, napi_get_buffer_info(env, argv[1], &data, &length));
  mirror_handle *handle = argc >= 3 ? handle_arg(env, argv[2]) : NULL;
  int answered;
  int32_t out = read_request(int_arg(env, argv[0]), data, length, handle && handle->mirror ? handle : NULL, ANSWER_BURST, &answered);
  napi_value result;
  CHECK(env, napi_create_int32(env, out, &result));
  return result;
}

static void mirror_finalize(napi_env env, void *data, void *hint) {
  (void)hint;
  mirror_handle *handle = data;
  napi_delete_reference(env, handle->shared);
  mirror_free(handle->mirror);
  kept_free(handle->kept);
  names_free(handle->names);
  made_free(handle->made);
  free(handle);
}

/*
 * createMirror(shared: Int32Array(1+), slots) -> mirror (freed with its last JS reference);
 * with two elements or more, kept opens too (shared[1]: their answers not yet taken); with
 * three, directory names too (shared[2]: their epoch); with four, made files too (shared[3]:
 * those answered and not yet taken).
 */
static napi_value create_mirror(napi_env env, napi_callback_info info) {
  ARGS(2);
  napi_typedarray_type type;
  size_t count;
  void *shared;
  if (argc < 2 || napi_get_typedarray_info(env, argv[0], &type, &count, &shared, NULL, NULL) != napi_ok || type != napi_int32_array || count < 1) {
    napi_throw_type_error(env, NULL, "createMirror: shared must be an Int32Array");
    return NULL;
  }
  mirror_handle *handle = calloc(1, sizeof *handle);
  if (handle) handle->mirror = mirror_new((uint32_t)int_arg(env, argv[1]), shared);
  if (handle && handle->mirror && count >= 2) handle->kept = kept_new((uint32_t)int_arg(env, argv[1]), (int32_t *)shared + 1);
  if (handle && handle->mirror && count >= 3) handle->names = names_new(NAMES_DIRS, (int32_t *)shared + 2);
  if (handle && handle->names && count >= 4) handle->made = made_new((int32_t *)shared + 3);
  if (!handle || !handle->mirror || (count >= 2 && !handle->kept) || (count >= 3 && !handle->names) || (count >= 4 && !handle->made)) {
    if (handle) {
      mirror_free(handle->mirror);
      kept_free(handle->kept);
      names_free(handle->names);
    }
    free(handle);
    return throw_errno(env, "createMirror", ENOMEM);
  }
  CHECK(env, napi_create_reference(env, argv[0], 1, &handle->shared));
  napi_value external;
  CHECK(env, napi_create_external(env, handle, mirror_finalize, NULL, &external));
  return external;
}

static int64_t int64_arg(napi_env env, napi_value value) {
  int64_t out = 0;
  napi_get_value_int64(env, value, &out);
  return out;
}

/* mirrorPublish(mirror, nodeid, attrOut: Buffer(104), ttlMs, epoch) -> kept */
static napi_value mirror_publish_js(napi_env env, napi_callback_info info) {
  ARGS(5);
  void *bytes;
  size_t length;
  attr_mirror *mirror = mirror_arg(env, argv[0]);
  int kept = 0;
  if (mirror && napi_get_buffer_info(env, argv[2], &bytes, &length) == napi_ok && length == ATTR_OUT_SIZE) {
    kept = mirror_publish(mirror, (uint64_t)int64_arg(env, argv[1]), bytes, (uint32_t)int_arg(env, argv[3]), int_arg(env, argv[4]));
  }
  napi_value result;
  CHECK(env, napi_get_boolean(env, kept, &result));
  return result;
}

/* mirrorSettled(mirror, opcode, nodeid, openFlags): a request JS answered (see mirror_settled and names_settled). */
static napi_value mirror_settled_js(napi_env env, napi_callback_info info) {
  ARGS(4);
  mirror_handle *handle = handle_arg(env, argv[0]);
  if (!handle) return NULL;
  mirror_settled(handle->mirror, (uint32_t)int_arg(env, argv[1]), (uint64_t)int64_arg(env, argv[2]), (uint32_t)int_arg(env, argv[3]));
  if (handle->names) names_settled(handle->names, (uint32_t)int_arg(env, argv[1]));
  return NULL;
}

/* namesPublish(mirror, nodeid, list: Buffer (names, each NUL-terminated), count, ttlMs, negative: Buffer(128), epoch) -> held */
static napi_value names_publish_js(napi_env env, napi_callback_info info) {
  ARGS(7);
  void *list, *negative;
  size_t length, negative_length;
  dir_names *names = names_arg(env, argv[0]);
  int held = 0;
  if (names && napi_get_buffer_info(env, argv[2], &list, &length) == napi_ok &&
      napi_get_buffer_info(env, argv[5], &negative, &negative_length) == napi_ok && negative_length == ENTRY_OUT_SIZE) {
    held = names_publish(names, (uint64_t)int64_arg(env, argv[1]), list, length, (uint32_t)int_arg(env, argv[3]),
                         (uint32_t)int_arg(env, argv[4]), negative, int_arg(env, argv[6]));
  }
  napi_value result;
  CHECK(env, napi_get_boolean(env, held, &result));
  return result;
}

/* namesHolds(mirror, nodeid) -> whether the names of the directory are held */
static napi_value names_holds_js(napi_env env, napi_callback_info info) {
  ARGS(2);
  dir_names *names = names_arg(env, argv[0]);
  napi_value result;
  CHECK(env, napi_get_boolean(env, names && names_holds(names, (uint64_t)int64_arg(env, argv[1])), &result));
  return result;
}

/* namesDrop(mirror, nodeid) */
static napi_value names_drop_js(napi_env env, napi_callback_info info) {
  ARGS(2);
  dir_names *names = names_arg(env, argv[0]);
  if (names) names_drop(names, (uint64_t)int64_arg(env, argv[1]));
  return NULL;
}

/* namesClear(mirror) */
static napi_value names_clear_js(napi_env env, napi_callback_info info) {
  ARGS(1);
  dir_names *names = names_arg(env, argv[0]);
  if (names) names_clear(names);
  return NULL;
}

/* namesGrant(mirror, nodeid, hostDir, gid, umask, ttlMs, openFlags) -> granted (see names_grant) */
static napi_value names_grant_js(napi_env env, napi_callback_info info) {
  ARGS(7);
  dir_names *names = names_arg(env, argv[0]);
  char host_dir[4096];
  size_t length = 0;
  int granted = 0;
  if (names && napi_get_value_string_utf8(env, argv[2], host_dir, sizeof host_dir, &length) == napi_ok && length < sizeof host_dir - 1) {
    granted = names_grant(names, (uint64_t)int64_arg(env, argv[1]), host_dir, int_arg(env, argv[3]), int_arg(env, argv[4]),
                          (uint32_t)int_arg(env, argv[5]), (uint32_t)int_arg(env, argv[6]));
  }
  napi_value result;
  CHECK(env, napi_get_boolean(env, granted, &result));
  return result;
}

/* namesGranted(mirror, nodeid) -> whether the directory's names are held with a grant */
static napi_value names_granted_js(napi_env env, napi_callback_info info) {
  ARGS(2);
  dir_names *names = names_arg(env, argv[0]);
  napi_value result;
  CHECK(env, napi_get_boolean(env, names && names_is_granted(names, (uint64_t)int64_arg(env, argv[1])), &result));
  return result;
}

/* madeReserve(mirror, nodeid, fh) -> kept (false: enough are reserved) */
static napi_value made_reserve_js(napi_env env, napi_callback_info info) {
  ARGS(3);
  made_files *made = made_arg(env, argv[0]);
  napi_value result;
  CHECK(env, napi_get_boolean(env, made && made_reserve(made, (uint64_t)int64_arg(env, argv[1]), (uint64_t)int64_arg(env, argv[2])), &result));
  return result;
}

/* madeReserved(mirror) -> the reserved pairs not yet used */
static napi_value made_reserved_js(napi_env env, napi_callback_info info) {
  ARGS(1);
  made_files *made = made_arg(env, argv[0]);
  napi_value result;
  CHECK(env, napi_create_uint32(env, made ? made_reserved(made) : 0, &result));
  return result;
}

/* madeTake(mirror) -> [dir, nodeid, fh, fd, backingId, name, madeAtMs][] answered since the last take, in order */
static napi_value made_take_js(napi_env env, napi_callback_info info) {
  ARGS(1);
  made_files *made = made_arg(env, argv[0]);
  static made_file taken[MADE_ANSWERED_MAX];
  uint32_t n = made ? made_take(made, taken, MADE_ANSWERED_MAX) : 0;
  napi_value list;
  CHECK(env, napi_create_array_with_length(env, n, &list));
  for (uint32_t i = 0; i < n; i++) {
    napi_value fields[7], tuple;
    CHECK(env, napi_create_double(env, (double)taken[i].dir, &fields[0]));
    CHECK(env, napi_create_double(env, (double)taken[i].nodeid, &fields[1]));
    CHECK(env, napi_create_double(env, (double)taken[i].fh, &fields[2]));
    CHECK(env, napi_create_int32(env, taken[i].fd, &fields[3]));
    CHECK(env, napi_create_int32(env, taken[i].backing_id, &fields[4]));
    CHECK(env, napi_create_string_utf8(env, taken[i].name, taken[i].name_length, &fields[5]));
    CHECK(env, napi_create_double(env, (double)taken[i].made_at_ms, &fields[6]));
    CHECK(env, napi_create_array_with_length(env, 7, &tuple));
    for (uint32_t k = 0; k < 7; k++) CHECK(env, napi_set_element(env, tuple, k, fields[k]));
    CHECK(env, napi_set_element(env, list, i, tuple));
  }
  return list;
}

/* mirrorDrop(mirror, nodeid) */
static napi_value mirror_drop_js(napi_env env, napi_callback_info info) {
  ARGS(2);
  attr_mirror *mirror = mirror_arg(env, argv[0]);
  if (mirror) mirror_drop(mirror, (uint64_t)int64_arg(env, argv[1]));
  return NULL;
}

/* mirrorClear(mirror) */
static napi_value mirror_clear_js(napi_env env, napi_callback_info info) {
  ARGS(1);
  attr_mirror *mirror = mirror_arg(env, argv[0]);
  if (mirror) mirror_clear(mirror);
  return NULL;
}

/* keptPublish(mirror, nodeid, fh, openFlags, backingId, ttlMs) */
static napi_value kept_publish_js(napi_env env, napi_callback_info info) {
  ARGS(6);
  kept_opens *kept = kept_arg(env, argv[0]);
  if (kept) {
    kept_publish(kept, (uint64_t)int64_arg(env, argv[1]), (uint64_t)int64_arg(env, argv[2]), (uint32_t)int_arg(env, argv[3]), int_arg(env, argv[4]), (uint32_t)int_arg(env, argv[5]));
  }
  return NULL;
}

/* keptUnpublish(mirror, nodeid, fh) */
static napi_value kept_unpublish_js(napi_env env, napi_callback_info info) {
  ARGS(3);
  kept_opens *kept = kept_arg(env, argv[0]);
  if (kept) kept_unpublish(kept, (uint64_t)int64_arg(env, argv[1]), (uint64_t)int64_arg(env, argv[2]));
  return NULL;
}

/* keptTakeAnswered(mirror, out: Float64Array) -> pairs written (node id, handle), at most out.length / 2. */
static napi_value kept_take_answered_js(napi_env env, napi_callback_info info) {
  ARGS(2);
  kept_opens *kept = kept_arg(env, argv[0]);
  napi_typedarray_type type;
  size_t count = 0;
  void *data = NULL;
  uint32_t taken = 0;
  if (kept && napi_get_typedarray_info(env, argv[1], &type, &count, &data, NULL, NULL) == napi_ok && type == napi_float64_array) {
    uint64_t pairs[KEPT_ANSWERED_MAX][2];
    uint32_t max = (uint32_t)(count / 2 < KEPT_ANSWERED_MAX ? count / 2 : KEPT_ANSWERED_MAX);
    taken = kept_take_answered(kept, &pairs[0][0], max);
    double *out = data;
    for (uint32_t i = 0; i < taken; i++) {
      out[2 * i] = (double)pairs[i][0];
      out[2 * i + 1] = (double)pairs[i][1];
    }
  }
  napi_value result;
  CHECK(env, napi_create_uint32(env, taken, &result));
  return result;
}

/* A uv_poll on the device; its JS callback is called on the loop when requests wait. */
typedef struct {
  uv_poll_t poll;
  napi_env env;
  napi_ref callback;
  napi_async_context context;
  int fd;
  /* in_flight[0]: requests not yet answered, kept by the JS side (read after its microtasks ran). */
  napi_ref in_flight_ref;
  const int32_t *in_flight;
  /* How long to keep looking for the next request after a burst that left nothing in flight. */
  int64_t spin_ns;
  int closing;
  /*
   * With a mirror, the spin reads the requests itself: it answers those the mirror can at
   * once, and leaves the first one JS must handle in `stage` (a buffer the callback gave) for
   * the next callback. Without, it only polls.
   */
  napi_ref handle_ref;
  mirror_handle *handle;
  napi_ref stage_ref;
  uint8_t *stage;
  size_t stage_length;
  /* The length of the request read into stage for JS, or -1. */
  int32_t staged;
} device_watch;

/*
 * A caller that works through files one by one (ls -l, grep -r, a build) sends its next
 * request a few microseconds after our reply. Sleeping in epoll in between costs a wake-up
 * of this thread per request, tens of microseconds on a VM that parks idle vCPUs; looking
 * for a while first does not. Only when the callback says nothing is in flight (no backend
 * call to wait for on the loop), and never longer than spin_ns after the last request.
 *
 * With a mirror the spin reads and answers itself: a reply within a microsecond or so of the
 * request reaches a caller whose CPU has not yet gone idle, where a reply after the loop's
 * callback (a few microseconds more) has to wake that CPU: on this kind of VM that doubled a
 * stat's time. Returns 0: nothing came; 1: the callback has something to read (a request in
 * stage, or an error); 2: requests were answered here, and the callback must run for the kept
 * opens among them before anything else on the loop.
 */
static int spin_for_next(device_watch *watch) {
  if (watch->spin_ns <= 0) return 0;
  int64_t until = now_ns() + watch->spin_ns;
  if (!watch->handle || !watch->stage) {
    struct pollfd p = {.fd = watch->fd, .events = POLLIN, .revents = 0};
    do {
      if (poll(&p, 1, 0) > 0) return 1;
    } while (now_ns() < until);
    return 0;
  }
  int total = 0;
  do {
    int answered;
    int32_t n = read_request(watch->fd, watch->stage, watch->stage_length, watch->handle, ANSWER_BURST - total, &answered);
    total += answered;
    if (n >= 0) {
      watch->staged = n;
      return 1;
    }
    if (n != -EAGAIN) return 1; /* the callback's own read meets it (ENODEV: unmounted) */
    if (total >= ANSWER_BURST) return 2;
    if (answered) until = now_ns() + watch->spin_ns;
  } while (now_ns() < until);
  return total ? 2 : 0;
}

/* The callback's result: the buffer the spin is to read the next request into (or none: it polls). */
static void take_stage(napi_env env, device_watch *watch, napi_value result) {
  bool is_buffer = false;
  void *data = NULL;
  size_t length = 0;
  if (watch->handle && napi_is_buffer(env, result, &is_buffer) == napi_ok && is_buffer &&
      napi_get_buffer_info(env, result, &data, &length) == napi_ok) {
    if (data == watch->stage) return;
    if (watch->stage_ref) napi_delete_reference(env, watch->stage_ref);
    watch->stage_ref = NULL;
    if (napi_create_reference(env, result, 1, &watch->stage_ref) != napi_ok) data = NULL;
  } else if (watch->stage_ref) {
    napi_delete_reference(env, watch->stage_ref);
    watch->stage_ref = NULL;
    data = NULL;
  }
  watch->stage = data;
  watch->stage_length = data ? length : 0;
}

static void on_closed(uv_handle_t *handle) {
  free(handle->data);
}

static void on_readable(uv_poll_t *poll, int status, int events) {
  (void)events;
  device_watch *watch = poll->data;
  if (watch->closing) return;
  napi_env env = watch->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value callback, global, args[2], result;
  napi_get_reference_value(env, watch->callback, &callback);
  napi_get_global(env, &global);
  napi_create_int32(env, status, &args[0]);
  for (;;) {
    /* The request the spin read for JS: the callback takes stage with it and gives the next. */
    napi_create_int32(env, watch->staged, &args[1]);
    if (watch->staged >= 0 && watch->stage_ref) {
      napi_delete_reference(env, watch->stage_ref);
      watch->stage_ref = NULL;
      watch->stage = NULL;
    }
    watch->staged = -1;
    /* make_callback runs the microtasks afterwards, as any I/O callback of Node does. */
    if (napi_make_callback(env, watch->context, global, callback, 2, args, &result) != napi_ok) break;
    if (watch->closing) break;
    take_stage(env, watch, result);
    if (*watch->in_flight != 0 || !spin_for_next(watch)) break;
  }
  napi_close_handle_scope(env, scope);
}

static void watch_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  (void)data; /* freed by stopWatch's close callback; a watch never stopped lives as long as the process */
}

/*
 * watchDevice(fd, callback, spinMicros, inFlight, unref?, mirror?) -> watch: callback(status,
 * staged) whenever fd is readable. inFlight: an Int32Array whose [0] says how many requests
 * are unanswered (see spin_for_next). unref: the watch alone does not keep the process alive
 * (a change feed). mirror: the spin reads and answers (spin_for_next); the callback returns
 * the buffer it is to read into, and `staged` >= 0 is the length of the request it read there
 * for JS (the buffer is then the callback's again).
 */
static napi_value watch_device(napi_env env, napi_callback_info info) {
  ARGS(6);
  uv_loop_t *loop;
  CHECK(env, napi_get_uv_event_loop(env, &loop));
  napi_typedarray_type type;
  size_t count;
  void *counter;
  if (napi_get_typedarray_info(env, argv[3], &type, &count, &counter, NULL, NULL) != napi_ok || type != napi_int32_array || count < 1) {
    napi_throw_type_error(env, NULL, "watchDevice: inFlight must be an Int32Array");
    return NULL;
  }
  device_watch *watch = calloc(1, sizeof *watch);
  if (!watch) return throw_errno(env, "watchDevice", ENOMEM);
  watch->env = env;
  watch->fd = int_arg(env, argv[0]);
  watch->spin_ns = (int64_t)int_arg(env, argv[2]) * 1000;
  watch->in_flight = counter;
  watch->staged = -1;
  CHECK(env, napi_create_reference(env, argv[3], 1, &watch->in_flight_ref));
  mirror_handle *mirror = argc >= 6 ? handle_arg(env, argv[5]) : NULL;
  if (mirror && mirror->mirror && napi_create_reference(env, argv[5], 1, &watch->handle_ref) == napi_ok) watch->handle = mirror;

  CHECK(env, napi_create_reference(env, argv[1], 1, &watch->callback));
  napi_value name;
  CHECK(env, napi_create_string_utf8(env, "backendfs:dev-fuse", NAPI_AUTO_LENGTH, &name));
  CHECK(env, napi_async_init(env, NULL, name, &watch->context));
  int err = uv_poll_init(loop, &watch->poll, int_arg(env, argv[0]));
  if (err == 0) {
    watch->poll.data = watch;
    err = uv_poll_start(&watch->poll, UV_READABLE, on_readable);
  }
  bool unref = false;
  if (err == 0 && argc >= 5 && napi_get_value_bool(env, argv[4], &unref) == napi_ok && unref) uv_unref((uv_handle_t *)&watch->poll);
  if (err != 0) {
    napi_delete_reference(env, watch->callback);
    napi_delete_reference(env, watch->in_flight_ref);
    if (watch->handle_ref) napi_delete_reference(env, watch->handle_ref);
    napi_async_destroy(env, watch->context);
    free(watch);
    return throw_errno(env, "uv_poll on /dev/fuse", -err);
  }
  napi_value handle;
  CHECK(env, napi_create_external(env, watch, watch_finalize, NULL, &handle));
  return handle;
}

/* stopWatch(watch): no more callbacks; the handle closes on the loop. */
static napi_value stop_watch(napi_env env, napi_callback_info info) {
  ARGS(1);
  device_watch *watch;
  CHECK(env, napi_get_value_external(env, argv[0], (void **)&watch));
  if (watch->closing) return NULL;
  watch->closing = 1;
  uv_poll_stop(&watch->poll);
  napi_delete_reference(env, watch->callback);
  napi_delete_reference(env, watch->in_flight_ref);
  if (watch->handle_ref) napi_delete_reference(env, watch->handle_ref);
  if (watch->stage_ref) napi_delete_reference(env, watch->stage_ref);
  watch->handle_ref = watch->stage_ref = NULL;
  watch->handle = NULL;
  watch->stage = NULL;
  napi_async_destroy(env, watch->context);
  uv_close((uv_handle_t *)&watch->poll, on_closed);
  return NULL;
}

/* backingOpen(devFd, fd) -> backing id (> 0) for FOPEN_PASSTHROUGH; throws with the errno. */
static napi_value backing_open(napi_env env, napi_callback_info info) {
  ARGS(2);
  struct backing_map map = {.fd = int_arg(env, argv[1]), .flags = 0, .padding = 0};
  int id = ioctl(int_arg(env, argv[0]), DEV_IOC_BACKING_OPEN, &map);
  if (id < 0) return throw_errno(env, "FUSE_DEV_IOC_BACKING_OPEN", errno);
  napi_value result;
  CHECK(env, napi_create_int32(env, id, &result));
  return result;
}

/* backingClose(devFd, id): the kernel drops the file once no open uses it. */
static napi_value backing_close(napi_env env, napi_callback_info info) {
  ARGS(2);
  uint32_t id = (uint32_t)int_arg(env, argv[1]);
  if (ioctl(int_arg(env, argv[0]), DEV_IOC_BACKING_CLOSE, &id) < 0) return throw_errno(env, "FUSE_DEV_IOC_BACKING_CLOSE", errno);
  return NULL;
}

/* inotifyInit() -> a non-blocking inotify descriptor (read with read(), watched with watchDevice). */
static napi_value inotify_init_js(napi_env env, napi_callback_info info) {
  (void)info;
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return throw_errno(env, "inotify_init1", errno);
  napi_value result;
  CHECK(env, napi_create_int32(env, fd, &result));
  return result;
}

/* inotifyAdd(fd, path, mask) -> watch descriptor, or -errno (ENOSPC: no watches left; ENOENT, ENOTDIR: gone). */
static napi_value inotify_add_js(napi_env env, napi_callback_info info) {
  ARGS(3);
  char path[4096];
  size_t length = 0;
  int32_t out;
  if (napi_get_value_string_utf8(env, argv[1], path, sizeof path, &length) != napi_ok || length >= sizeof path - 1) {
    out = -ENAMETOOLONG;
  } else {
    int wd = inotify_add_watch(int_arg(env, argv[0]), path, (uint32_t)int64_arg(env, argv[2]));
    out = wd < 0 ? -errno : wd;
  }
  napi_value result;
  CHECK(env, napi_create_int32(env, out, &result));
  return result;
}

/* inotifyRemove(fd, wd): the watch ends (its IN_IGNORED follows). */
static napi_value inotify_remove_js(napi_env env, napi_callback_info info) {
  ARGS(2);
  inotify_rm_watch(int_arg(env, argv[0]), int_arg(env, argv[1]));
  return NULL;
}

/* Writable and configurable (napi_default_method), as a JavaScript object's methods are: tests can observe the calls. */
#define METHOD(name, fn) {name, NULL, fn, NULL, NULL, NULL, napi_default_method, NULL}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor methods[] = {
      METHOD("read", device_read),
      METHOD("watchDevice", watch_device),
      METHOD("stopWatch", stop_watch),
      METHOD("backingOpen", backing_open),
      METHOD("backingClose", backing_close),
      METHOD("createMirror", create_mirror),
      METHOD("mirrorPublish", mirror_publish_js),
      METHOD("mirrorSettled", mirror_settled_js),
      METHOD("mirrorDrop", mirror_drop_js),
      METHOD("mirrorClear", mirror_clear_js),
      METHOD("keptPublish", kept_publish_js),
      METHOD("keptUnpublish", kept_unpublish_js),
      METHOD("keptTakeAnswered", kept_take_answered_js),
      METHOD("namesPublish", names_publish_js),
      METHOD("namesHolds", names_holds_js),
      METHOD("namesDrop", names_drop_js),
      METHOD("namesClear", names_clear_js),
      METHOD("namesGrant", names_grant_js),
      METHOD("namesGranted", names_granted_js),
      METHOD("madeReserve", made_reserve_js),
      METHOD("madeReserved", made_reserved_js),
      METHOD("madeTake", made_take_js),
      METHOD("inotifyInit", inotify_init_js),
      METHOD("inotifyAdd", inotify_add_js),
      METHOD("inotifyRemove", inotify_remove_js),
  };
  CHECK(env, napi_define_properties(env, exports, sizeof methods / sizeof methods[0], methods));
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
