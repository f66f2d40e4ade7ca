/*
 * The Relay VM profiler's record (TVM's VirtualMachineDebug, src/runtime/vm/profiler/vm.cc):
 * while a VM records (profile_start .. profile_stop, vm_machine.c), vm_step.c adds an event
 * for every kernel call and every instruction TVM times, with the shapes TVM's report shows
 * and the CLOCK_MONOTONIC times around the work alone. The Python face
 * (tvmrt/runtime/profiler_vm.py) reads the events once, after the invoke, and makes TVM's
 * report rows of them: no Python runs between the calls it times.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm.h"

#define TEXT_MAX 4096 /* one event's shapes; longer ones are cut */
#define EVENT_BYTES 40

void tvmrt_vm_trace_clear(vm_trace* t) { t->count = t->used = 0; }

void tvmrt_vm_trace_free(vm_trace* t) {
  free(t->events);
  free(t->text);
  free(t->blob);
  memset(t, 0, sizeof(*t));
}

/* a text being written for one event: cut at TEXT_MAX */
typedef struct {
  char buf[TEXT_MAX];
  size_t used;
} text_out;

static void put(text_out* o, const char* s) {
  size_t n = strlen(s), room = sizeof(o->buf) - 1 - o->used;
  if (n > room) n = room;
  memcpy(o->buf + o->used, s, n);
  o->used += n;
  o->buf[o->used] = '\0';
}

static void put_int(text_out* o, long long v) {
  char digits[24];
  snprintf(digits, sizeof(digits), "%lld", v);
  put(o, digits);
}

/* TVM's ShapeString of one tensor: "float32[1, 3, 16, 16]" */
static void shape_text(text_out* o, DLDataType t, const int64_t* dims, int ndim) {
  char dtype[64];
  int d;
  put(o, tvmrt_dtype_text(t, dtype, sizeof(dtype)));
  put(o, "[");
  for (d = 0; d < ndim; ++d) {
    if (d) put(o, ", ");
    put_int(o, (long long)dims[d]);
  }
  put(o, "]");
}

/* the values of an integer tensor (a size or shape register), as TVM's report reads them;
   none for anything else */
static int register_ints(tvmrt_object* v, int64_t* out) {
  tvmrt_ndarray* a = tvmrt_vm_as_array(v);
  size_t nbytes, count, i, item;
  if (a == NULL || (a->dl.dtype.code != kDLInt && a->dl.dtype.code != kDLUInt) ||
      a->dl.dtype.lanes != 1 || !tvmrt_is_compact(&a->dl) ||
      tvmrt_tensor_nbytes(&a->dl, &nbytes) != 0) {
    return 0;
  }
  switch (a->dl.dtype.bits) { /* the widths tvmrt_vm_int_at reads */
    case 1:
    case 8: item = 1; break;
    case 16: item = 2; break;
    case 32: item = 4; break;
    case 64: item = 8; break;
    default: return 0;
  }
  count = nbytes / item < RT_MAX_NDIM ? nbytes / item : RT_MAX_NDIM;
  for (i = 0; i < count; ++i) out[i] = tvmrt_vm_int_at(a, i);
  return (int)count;
}

static int add_event(vm_trace* t, int32_t kind, int64_t index, int64_t dev_type, int64_t dev_id,
                     const text_out* text) {
  vm_event* e;
  if (t->count >= VM_TRACE_MAX_EVENTS || t->used + text->used > VM_TRACE_MAX_TEXT) {
    return tvmrt_fail("InvalidArgumentError",
                      "the profiled invoke made more than %u timed calls or %u bytes of shapes; "
                      "a profile holds at most that many",
                      VM_TRACE_MAX_EVENTS, VM_TRACE_MAX_TEXT);
  }
  if (t->count == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    vm_event* grown = (vm_event*)realloc(t->events, cap * sizeof(vm_event));
    if (grown == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot grow the profile");
    t->events = grown, t->cap = cap;
  }
  if (t->used + text->used > t->text_cap) {
    size_t cap = t->text_cap ? t->text_cap : 4096;
    char* grown;
    while (cap < t->used + text->used) cap *= 2;
    if ((grown = (char*)realloc(t->text, cap)) == NULL) {
      return tvmrt_fail("DeviceOutOfMemoryError", "cannot grow the profile");
    }
    t->text = grown, t->text_cap = cap;
  }
  if (text->used) memcpy(t->text + t->used, text->buf, text->used);
  e = &t->events[t->count];
  e->kind = kind;
  e->index = (int32_t)index;
  e->dev_type = (int32_t)dev_type;
  e->dev_id = (int32_t)dev_id;
  e->t0 = e->t1 = 0;
  e->text_off = (uint32_t)t->used;
  e->text_len = (uint32_t)text->used;
  t->used += text->used;
  return (int)t->count++;
}

int tvmrt_vm_trace_kernel(vm_trace* t, int64_t prim, const TVMValue* vals, int n) {
  text_out o;
  const DLTensor* last = n > 0 ? (const DLTensor*)vals[n - 1].v_handle : NULL;
  int i;
  o.used = 0;
  o.buf[0] = '\0';
  for (i = 0; i < n; ++i) {
    const DLTensor* x = (const DLTensor*)vals[i].v_handle;
    if (i > 0) put(&o, ", ");
    shape_text(&o, x->dtype, x->shape, x->ndim);
  }
  return add_event(t, 0, prim, last ? (int64_t)last->device.device_type : -1,
                   last ? (int64_t)last->device.device_id : -1, &o);
}

int tvmrt_vm_trace_instruction(vm_trace* t, const vm_ins* ins, tvmrt_object* const* regs) {
  text_out o;
  int64_t dims[RT_MAX_NDIM], dev = -1;
  o.used = 0;
  o.buf[0] = '\0';
  switch (ins->op) {
    case VM_ALLOC_STORAGE: /* the dtype hint with the static shape, or the size register's */
      dev = ins->dev;
      if (ins->r0 >= 0) shape_text(&o, ins->dtype, dims, register_ints(regs[ins->r0], dims));
      else shape_text(&o, ins->dtype, ins->shape, ins->ndim);
      break;
    case VM_ALLOC_TENSOR: shape_text(&o, ins->dtype, ins->shape, ins->ndim); break;
    case VM_ALLOC_TENSOR_REG:
      shape_text(&o, ins->dtype, dims, register_ints(regs[ins->r2], dims));
      break;
    case VM_DEVICE_COPY: dev = ins->imm2; break; /* the destination */
    case VM_RESHAPE_TENSOR:
    case VM_KILL_REGISTER: break;
    default: return -2;
  }
  return add_event(t, 1, ins->op, dev, 0, &o);
}

void tvmrt_vm_trace_times(vm_trace* t, int event, uint64_t t0, uint64_t t1) {
  if (event >= 0 && (size_t)event < t->count) t->events[event].t0 = t0, t->events[event].t1 = t1;
}

static void put_u32(uint8_t* p, uint32_t v) {
  int i;
  for (i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t* p, uint64_t v) {
  int i;
  for (i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> (8 * i));
}

int tvmrt_vm_trace_blob(vm_trace* t, TVMValue* ret, int* rc) {
  size_t size = 8 + t->count * EVENT_BYTES + t->used, i;
  uint8_t* blob = (uint8_t*)malloc(size);
  if (blob == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot hand out the profile");
  put_u64(blob, (uint64_t)t->count);
  for (i = 0; i < t->count; ++i) {
    const vm_event* e = &t->events[i];
    uint8_t* p = blob + 8 + i * EVENT_BYTES;
    put_u32(p, (uint32_t)e->kind);
    put_u32(p + 4, (uint32_t)e->index);
    put_u32(p + 8, (uint32_t)e->dev_type);
    put_u32(p + 12, (uint32_t)e->dev_id);
    put_u64(p + 16, e->t0);
    put_u64(p + 24, e->t1);
    put_u32(p + 32, e->text_off);
    put_u32(p + 36, e->text_len);
  }
  if (t->used) memcpy(blob + 8 + t->count * EVENT_BYTES, t->text, t->used);
  free(t->events); /* the bytes hold them now: a long record is not kept twice */
  free(t->text);
  t->events = NULL, t->text = NULL;
  t->count = t->cap = t->used = t->text_cap = 0;
  free(t->blob);
  t->blob = blob;
  t->blob_ref.data = (const char*)blob;
  t->blob_ref.size = size;
  ret->v_handle = &t->blob_ref;
  *rc = kTVMBytes;
  return 0;
}
