/*
 * The values of the Relax VM: what a register holds (rx_value: a number, a data type, an
 * opaque pointer, or a reference to an object), the objects the VM makes (strings, shapes,
 * tuples, closures, storages; tensors are the runtime's arrays), their conversion to and
 * from the packed-function ABI, and the storage allocators of the VM's devices with the
 * live-bytes budget every VM value is charged to.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relax.h"

#define PAGE 4096

const char* const tvmrt_rx_kind_names[RX_NUM_KINDS] = {
    "None",   "int",   "float",   "bool",     "DataType", "handle", "String", "Shape",
    "Tensor", "Tuple", "Closure", "Function", "Storage",  "Module", "Map"};

static int64_t env_int(const char* name, int64_t fallback) {
  const char* s = getenv(name);
  char* end = NULL;
  long long v;
  if (s == NULL || *s == '\0') return fallback;
  v = strtoll(s, &end, 10);
  return (end != NULL && *end == '\0' && v >= -1) ? (int64_t)v : fallback;
}

void tvmrt_rx_limits_from_env(rx_limits* out) {
  out->max_steps = env_int("TVMRT_RELAX_MAX_STEPS", 100000000); /* 0: no limit */
  out->max_frames = env_int("TVMRT_RELAX_MAX_FRAMES", 10000);
  if (out->max_frames <= 0) out->max_frames = 10000;
  out->max_live = env_int("TVMRT_RELAX_MAX_LIVE_BYTES", -1);
  out->max_storage = env_int("TVMRT_RELAX_MAX_STORAGE_BYTES", -1);
}

/* ---------------------------------------------------------------------------------- */
/* values                                                                              */

void tvmrt_rx_release(rx_value* v) {
  if (tvmrt_rx_is_object(v->kind) && v->v.obj != NULL) tvmrt_release(v->v.obj);
  v->kind = RX_NULL;
  v->v.i = 0;
}

void tvmrt_rx_copy(rx_value* dst, rx_value src) {
  if (tvmrt_rx_is_object(src.kind)) tvmrt_retain(src.v.obj);
  tvmrt_rx_release(dst);
  *dst = src;
}

rx_value tvmrt_rx_object(int kind, tvmrt_object* obj) {
  rx_value v;
  v.kind = obj != NULL ? kind : RX_NULL;
  v.pad = 0;
  v.v.obj = obj;
  return v;
}

static void plain_destroy(tvmrt_object* obj) {
  obj->magic = 0;
  free(obj);
}

rx_str* tvmrt_rx_str_new(const char* s, size_t n) {
  rx_str* out;
  if (n > ((size_t)1 << 30)) { /* 1 GiB: more than any executable holds */
    tvmrt_fail("DeviceOutOfMemoryError", "a string of %zu bytes", n);
    return NULL;
  }
  out = (rx_str*)malloc(sizeof(rx_str) + n + 1);
  if (out == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a string of %zu bytes", n);
    return NULL;
  }
  out->len = n;
  if (n) memcpy(out->data, s, n);
  out->data[n] = '\0';
  if (tvmrt_object_init(&out->hdr, RT_MAGIC_RX_STR, plain_destroy) != 0) {
    free(out);
    return NULL;
  }
  return out;
}

rx_shape* tvmrt_rx_shape_new(const int64_t* dims, size_t n) {
  rx_shape* out;
  if (n > RT_MAX_NODES) {
    tvmrt_fail("DeviceOutOfMemoryError", "a shape of %zu dimensions", n);
    return NULL;
  }
  out = (rx_shape*)malloc(sizeof(rx_shape) + (n ? n : 1) * sizeof(int64_t));
  if (out == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a shape of %zu dimensions", n);
    return NULL;
  }
  out->ndim = n;
  if (n) memcpy(out->dims, dims, n * sizeof(int64_t));
  tvmrt_object_init_unlisted(&out->hdr, RT_MAGIC_RX_SHAPE, plain_destroy); /* see rt.h */
  return out;
}

/* Freeing a tuple or closure frees what it holds; a chain of them (a tuple in a tuple in
   ...) is freed iteratively: the values a dying container held go to this thread's list,
   which the outermost free empties, so no nesting depth grows the C stack. The list lives
   in the thread's own storage (nothing to free when the thread ends) until a long chain
   outgrows it; then it is on the heap until the outermost free has emptied it. */
#define PENDING_INLINE 64
static _Thread_local rx_value t_inline[PENDING_INLINE];
static _Thread_local rx_value* t_pending;
static _Thread_local size_t t_npending, t_cap;
static _Thread_local int t_draining;

static void release_items(rx_value* items, size_t n) {
  size_t i;
  if (t_pending == NULL) {
    t_pending = t_inline;
    t_cap = PENDING_INLINE;
  }
  if (t_npending + n > t_cap) {
    size_t cap = t_cap;
    rx_value* grown;
    while (cap < t_npending + n) cap *= 2;
    grown = (rx_value*)malloc(cap * sizeof(rx_value));
    if (grown == NULL) { /* no room to defer: free in place (deeper stack, same result) */
      for (i = 0; i < n; ++i) tvmrt_rx_release(&items[i]);
      return;
    }
    memcpy(grown, t_pending, t_npending * sizeof(rx_value));
    if (t_pending != t_inline) free(t_pending);
    t_pending = grown;
    t_cap = cap;
  }
  for (i = 0; i < n; ++i) {
    if (tvmrt_rx_is_object(items[i].kind)) t_pending[t_npending++] = items[i];
    items[i].kind = RX_NULL;
  }
  if (t_draining) return; /* an outer free empties the list */
  t_draining = 1;
  while (t_npending > 0) {
    rx_value v = t_pending[--t_npending];
    tvmrt_rx_release(&v); /* may append what it held */
  }
  t_draining = 0;
  if (t_pending != t_inline) { /* a long chain's list is not kept */
    free(t_pending);
    t_pending = t_inline;
    t_cap = PENDING_INLINE;
  }
}

static void tuple_destroy(tvmrt_object* obj) {
  rx_tuple* t = (rx_tuple*)obj;
  release_items(t->items, t->size);
  obj->magic = 0;
  free(t);
}

static void closure_destroy(tvmrt_object* obj) {
  rx_closure* c = (rx_closure*)obj;
  release_items(c->bound, c->nbound);
  if (c->packed != NULL) tvmrt_release(&c->packed->hdr);
  obj->magic = 0;
  free(c);
}

static rx_tuple* items_new(size_t n, uint32_t magic, const char* what) {
  rx_tuple* t;
  if (n > RX_MAX_ARGS * (size_t)256) {
    tvmrt_fail("DeviceOutOfMemoryError", "a %s of %zu items", what, n);
    return NULL;
  }
  t = (rx_tuple*)calloc(1, sizeof(rx_tuple) + (n ? n : 1) * sizeof(rx_value));
  if (t == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a %s of %zu items", what, n);
    return NULL;
  }
  t->size = n;
  if (tvmrt_object_init(&t->hdr, magic, tuple_destroy) != 0) {
    free(t);
    return NULL;
  }
  return t;
}

rx_tuple* tvmrt_rx_tuple_new(size_t n) { return items_new(n, RT_MAGIC_RX_TUPLE, "tuple"); }

rx_tuple* tvmrt_rx_map_new(size_t pairs) {
  if (pairs > RX_MAX_ARGS * (size_t)128) {
    tvmrt_fail("DeviceOutOfMemoryError", "a map of %zu items", pairs);
    return NULL;
  }
  return items_new(2 * pairs, RT_MAGIC_RX_MAP, "map");
}

int tvmrt_rx_map_set(rx_tuple* m, size_t* used, const char* key, rx_value value) {
  size_t i;
  rx_str* k;
  for (i = 0; i < *used; ++i) { /* a few names per graph input: a scan, as input lookups */
    if (strcmp(((rx_str*)m->items[2 * i].v.obj)->data, key) == 0) {
      tvmrt_rx_release(&m->items[2 * i + 1]);
      m->items[2 * i + 1] = value;
      return 0;
    }
  }
  if (2 * (*used + 1) > m->size || (k = tvmrt_rx_str_new(key, strlen(key))) == NULL) {
    tvmrt_rx_release(&value);
    return 2 * (*used + 1) > m->size ? tvmrt_fail("InternalError", "a map is full") : -1;
  }
  m->items[2 * *used] = tvmrt_rx_object(RX_STR, &k->hdr);
  m->items[2 * *used + 1] = value;
  ++*used;
  return 0;
}

rx_closure* tvmrt_rx_closure_new(uint64_t owner, int64_t func, tvmrt_func* packed, const char* name,
                                 const rx_value* bound, size_t nbound) {
  rx_closure* c;
  size_t i;
  if (nbound > RX_MAX_ARGS) {
    tvmrt_fail("InvalidArgumentError", "a closure binding %zu arguments (at most %d)", nbound,
               RX_MAX_ARGS);
    return NULL;
  }
  c = (rx_closure*)calloc(1, sizeof(rx_closure) + (nbound ? nbound : 1) * sizeof(rx_value));
  if (c == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a closure");
    return NULL;
  }
  c->owner = owner;
  c->func = func;
  c->packed = packed;
  if (packed != NULL) tvmrt_retain(&packed->hdr);
  snprintf(c->name, sizeof(c->name), "%s", name != NULL ? name : "");
  c->nbound = nbound;
  for (i = 0; i < nbound; ++i) tvmrt_rx_copy(&c->bound[i], bound[i]);
  if (tvmrt_object_init(&c->hdr, RT_MAGIC_RX_CLOSURE, closure_destroy) != 0) {
    release_items(c->bound, nbound);
    if (packed != NULL) tvmrt_release(&packed->hdr);
    free(c);
    return NULL;
  }
  return c;
}

tvmrt_ndarray* tvmrt_rx_tensor(rx_value v) {
  if (v.kind != RX_TENSOR) return NULL;
  return (tvmrt_ndarray*)((char*)v.v.obj - offsetof(tvmrt_ndarray, hdr));
}
rx_shape* tvmrt_rx_shape(rx_value v) { return v.kind == RX_SHAPE ? (rx_shape*)v.v.obj : NULL; }
rx_str* tvmrt_rx_str(rx_value v) { return v.kind == RX_STR ? (rx_str*)v.v.obj : NULL; }
rx_tuple* tvmrt_rx_tuple(rx_value v) { return v.kind == RX_TUPLE ? (rx_tuple*)v.v.obj : NULL; }
rx_tuple* tvmrt_rx_map(rx_value v) { return v.kind == RX_MAP ? (rx_tuple*)v.v.obj : NULL; }

const char* tvmrt_rx_type_key(rx_value v) {
  switch (v.kind) {
    case RX_NULL: return "None";
    case RX_INT: return "int";
    case RX_FLOAT: return "float";
    case RX_BOOL: return "bool";
    case RX_DTYPE: return "DataType";
    case RX_HANDLE: return "void*";
    case RX_STR: return "runtime.String";
    case RX_SHAPE: return "runtime.ShapeTuple";
    case RX_TENSOR: return "runtime.NDArray";
    case RX_TUPLE: return "Array";
    case RX_CLOSURE: return "relax.vm.Closure";
    case RX_FUNC: return "runtime.PackedFunc";
    case RX_STORAGE: return "relax.Storage";
    case RX_MODULE: return "runtime.Module";
    case RX_MAP: return "Map";
    default: return "unknown";
  }
}

/* ---------------------------------------------------------------------------------- */
/* the packed-function ABI                                                             */

int tvmrt_rx_to_packed(rx_value v, int era, TVMValue* out, int* code, tvmrt_object** temp) {
  (void)era;
  *temp = NULL;
  switch (v.kind) {
    case RX_NULL: out->v_handle = NULL, *code = kTVMNullptr; return 0;
    case RX_INT: out->v_int64 = v.v.i, *code = kDLInt; return 0;
    case RX_BOOL: out->v_int64 = v.v.i != 0, *code = kDLInt; return 0;
    case RX_FLOAT: out->v_float64 = v.v.f, *code = kDLFloat; return 0;
    case RX_DTYPE: out->v_type = v.v.t, *code = kTVMDataType; return 0;
    case RX_HANDLE: out->v_handle = v.v.p, *code = kTVMOpaqueHandle; return 0;
    case RX_STR: out->v_str = ((rx_str*)v.v.obj)->data, *code = kTVMStr; return 0;
    case RX_TENSOR: out->v_handle = &tvmrt_rx_tensor(v)->dl, *code = kTVMNDArrayHandle; return 0;
    case RX_FUNC: out->v_handle = v.v.obj, *code = kTVMPackedFuncHandle; return 0;
    case RX_MODULE: out->v_handle = v.v.obj, *code = kTVMModuleHandle; return 0;
    default:                         /* shapes, tuples, closures, storages: the runtime's objects */
      tvmrt_object_publish(v.v.obj); /* it leaves the VM: handle checks must find it */
      out->v_handle = v.v.obj;
      *code = kTVMObjectHandle;
      return 0;
  }
}

/* the value kind of a live object of this runtime a Relax value can hold (RX_STR ... RX_MODULE,
   RX_TENSOR for an array), -1 for anything else: one lookup of the live set */
static int live_kind(const void* p) { return tvmrt_rx_kind_of_magic(tvmrt_object_live_magic(p)); }

int tvmrt_rx_kind_of_magic(uint32_t magic) {
  switch (magic) {
    case RT_MAGIC_RX_STR: return RX_STR;
    case RT_MAGIC_RX_SHAPE: return RX_SHAPE;
    case RT_MAGIC_RX_TUPLE: return RX_TUPLE;
    case RT_MAGIC_RX_MAP: return RX_MAP;
    case RT_MAGIC_RX_CLOSURE: return RX_CLOSURE;
    case RT_MAGIC_RX_STORAGE: return RX_STORAGE;
    case RT_MAGIC_FUNC: return RX_FUNC;
    case RT_MAGIC_MODULE: return RX_MODULE;
    case RT_MAGIC_ARRAY: return RX_TENSOR;
    default: return -1;
  }
}

int tvmrt_rx_is_live_object(const void* p) {
  int kind = live_kind(p);
  return kind >= 0 && kind != RX_TENSOR;
}

int tvmrt_rx_from_packed(TVMValue v, int code, int ret, rx_value* out) {
  tvmrt_object* obj = NULL;
  int kind;
  out->pad = 0;
  /* compiled code passes the VM's own values through tvm-ffi calls as a DLTensor* of one of
     the runtime's arrays and as an opaque pointer to an object: the same values again */
  if (code == kTVMDLTensorHandle && v.v_handle != NULL &&
      tvmrt_object_live(&((tvmrt_ndarray*)v.v_handle)->hdr, RT_MAGIC_ARRAY)) {
    code = kTVMNDArrayHandle;
  } else if (code == kTVMOpaqueHandle) {
    kind = live_kind(v.v_handle);
    if (kind >= 0 && kind != RX_TENSOR) {
      code = kind == RX_FUNC     ? kTVMPackedFuncHandle
             : kind == RX_MODULE ? kTVMModuleHandle
                                 : kTVMObjectHandle;
    }
  }
  switch (code) {
    case kDLInt:
    case kDLUInt: out->kind = RX_INT, out->v.i = v.v_int64; return 0;
    case kTVMArgBool: out->kind = RX_BOOL, out->v.i = v.v_int64 != 0; return 0;
    case kDLFloat: out->kind = RX_FLOAT, out->v.f = v.v_float64; return 0;
    case kTVMNullptr: out->kind = RX_NULL, out->v.i = 0; return 0;
    case kTVMOpaqueHandle: out->kind = RX_HANDLE, out->v.p = v.v_handle; return 0;
    case kTVMDataType: out->kind = RX_DTYPE, out->v.t = v.v_type; return 0;
    case kTVMStr: {
      rx_str* s = tvmrt_rx_str_new(v.v_str != NULL ? v.v_str : "", v.v_str ? strlen(v.v_str) : 0);
      if (s == NULL) return -1;
      *out = tvmrt_rx_object(RX_STR, &s->hdr);
      return 0;
    }
    case kTVMBytes: {
      const TVMByteArray* b = (const TVMByteArray*)v.v_handle;
      rx_str* s = tvmrt_rx_str_new(b != NULL ? b->data : "", b != NULL ? b->size : 0);
      if (s == NULL) return -1;
      *out = tvmrt_rx_object(RX_STR, &s->hdr);
      return 0;
    }
    case kTVMNDArrayHandle: {
      tvmrt_ndarray* a = tvmrt_ndarray_from_handle(v.v_handle);
      if (a == NULL) return -1;
      if (!ret) tvmrt_retain(&a->hdr);
      *out = tvmrt_rx_object(RX_TENSOR, &a->hdr);
      return 0;
    }
    case kTVMDLTensorHandle: { /* TVM copies a DLTensor it did not make */
      const DLTensor* dl = (const DLTensor*)v.v_handle;
      tvmrt_ndarray* a;
      size_t nbytes;
      if (dl == NULL || dl->ndim < 0 || dl->ndim > RT_MAX_NDIM || (dl->ndim && !dl->shape) ||
          tvmrt_tensor_nbytes(dl, &nbytes) != 0 || (dl->data == NULL && nbytes > 0)) {
        return tvmrt_fail("ArgumentTypeError",
                          "a DLTensor argument needs data and a shape of at most %d "
                          "dimensions, none negative",
                          RT_MAX_NDIM);
      }
      a = tvmrt_ndarray_empty_on(dl->shape, dl->ndim, dl->dtype, dl->device);
      if (a == NULL) return -1;
      a->dl.device = dl->device;
      if (TVMArrayCopyFromTo((DLTensor*)dl, &a->dl, NULL) != 0) {
        tvmrt_release(&a->hdr);
        return -1;
      }
      *out = tvmrt_rx_object(RX_TENSOR, &a->hdr);
      return 0;
    }
    case kTVMPackedFuncHandle:
      if (tvmrt_func_check(v.v_handle) == NULL) return -1;
      obj = (tvmrt_object*)v.v_handle;
      kind = RX_FUNC;
      break;
    case kTVMModuleHandle:
      if (tvmrt_module_check(v.v_handle) == NULL) return -1;
      obj = (tvmrt_object*)v.v_handle;
      kind = RX_MODULE;
      break;
    case kTVMObjectHandle:
      obj = (tvmrt_object*)v.v_handle;
      kind = live_kind(obj);
      if (kind < 0 || kind == RX_TENSOR)
        return tvmrt_fail("ArgumentTypeError",
                          "%p is not a live object of this runtime (a string, shape, tuple, "
                          "closure, storage, function or module)",
                          v.v_handle);
      break;
    default:
      return tvmrt_fail("ArgumentTypeError", "the Relax VM cannot take a value of type code %d",
                        code);
  }
  if (!ret) tvmrt_retain(obj);
  *out = tvmrt_rx_object(kind, obj);
  return 0;
}

/* ---------------------------------------------------------------------------------- */
/* storage                                                                             */

typedef struct {
  void* data;
  size_t size;
} free_buf;

/* the budget of one VM's live values: every pool of the VM holds it */
struct rx_budget {
  tvmrt_object hdr;
  int64_t live; /* atomics */
  int64_t max_live;
};

struct rx_pool {
  tvmrt_object hdr;
  pthread_mutex_t mu;
  DLDevice dev;
  int pooled;
  int64_t max_storage;
  rx_budget* budget; /* a reference */
  free_buf* free_list;
  size_t num_free, cap_free, free_bytes;
};

enum { RT_MAGIC_RX_POOL = 0x52504f31, RT_MAGIC_RX_BUDGET = 0x52424431 };

static void budget_destroy(tvmrt_object* obj) {
  obj->magic = 0;
  free(obj);
}

rx_budget* tvmrt_rx_budget_new(int64_t max_live) {
  rx_budget* b = (rx_budget*)calloc(1, sizeof(rx_budget));
  if (b == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a budget");
    return NULL;
  }
  if (tvmrt_object_init(&b->hdr, RT_MAGIC_RX_BUDGET, budget_destroy) != 0) {
    free(b);
    return NULL;
  }
  b->max_live = max_live;
  return b;
}

void tvmrt_rx_budget_release(rx_budget* b) {
  if (b != NULL) tvmrt_release(&b->hdr);
}

int64_t tvmrt_rx_budget_live(const rx_budget* b) {
  return __atomic_load_n(&b->live, __ATOMIC_RELAXED);
}

static void buffer_free(DLDevice dev, void* data) {
  const tvmrt_device_backend* backend = tvmrt_device_backend_of(dev.device_type);
  if (data == NULL) return;
  if (backend != NULL) backend->free(dev.device_id, data);
  else free(data);
}

static void pool_trim(rx_pool* p) { /* under p->mu */
  size_t i;
  for (i = 0; i < p->num_free; ++i) buffer_free(p->dev, p->free_list[i].data);
  __atomic_sub_fetch(&p->budget->live, (int64_t)p->free_bytes, __ATOMIC_RELAXED);
  p->num_free = 0;
  p->free_bytes = 0;
}

static void pool_destroy(tvmrt_object* obj) {
  rx_pool* p = (rx_pool*)obj;
  pool_trim(p);
  free(p->free_list);
  tvmrt_release(&p->budget->hdr);
  pthread_mutex_destroy(&p->mu);
  obj->magic = 0;
  free(p);
}

rx_pool* tvmrt_rx_pool_new(DLDevice dev, int pooled, rx_budget* budget, const rx_limits* limits) {
  rx_pool* p = (rx_pool*)calloc(1, sizeof(rx_pool));
  if (p == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the VM's allocator");
    return NULL;
  }
  if (tvmrt_object_init(&p->hdr, RT_MAGIC_RX_POOL, pool_destroy) != 0) {
    free(p);
    return NULL;
  }
  pthread_mutex_init(&p->mu, NULL);
  p->dev = dev;
  p->pooled = pooled;
  p->max_storage = limits->max_storage;
  p->budget = budget;
  tvmrt_retain(&budget->hdr);
  return p;
}

void tvmrt_rx_pool_release(rx_pool* p) {
  if (p != NULL) tvmrt_release(&p->hdr);
}

int tvmrt_rx_charge(rx_pool* p, int64_t bytes, const char* what) {
  rx_budget* b = p->budget;
  int64_t now = __atomic_add_fetch(&b->live, bytes, __ATOMIC_RELAXED);
  if (bytes > 0 && b->max_live >= 0 && now > b->max_live) {
    __atomic_sub_fetch(&b->live, bytes, __ATOMIC_RELAXED);
    return tvmrt_fail("DeviceOutOfMemoryError",
                      "%s of %lld bytes: the Relax VM would hold %lld bytes at once, over its "
                      "budget of %lld bytes (TVMRT_RELAX_MAX_LIVE_BYTES)",
                      what, (long long)bytes, (long long)now, (long long)b->max_live);
  }
  return 0;
}

static void storage_destroy(tvmrt_object* obj) {
  rx_storage* s = (rx_storage*)obj;
  rx_pool* p = s->pool;
  int kept = 0;
  pthread_mutex_lock(&p->mu);
  if (p->pooled) {
    if (p->num_free == p->cap_free) {
      size_t cap = p->cap_free ? p->cap_free * 2 : 16;
      free_buf* grown = (free_buf*)realloc(p->free_list, cap * sizeof(free_buf));
      if (grown != NULL) p->free_list = grown, p->cap_free = cap;
    }
    if (p->num_free < p->cap_free) {
      free_buf b = {s->data, s->capacity};
      p->free_list[p->num_free++] = b;
      p->free_bytes += s->capacity;
      kept = 1; /* still charged: a free buffer is memory the VM holds */
    }
  }
  pthread_mutex_unlock(&p->mu);
  if (!kept) {
    buffer_free(p->dev, s->data);
    __atomic_sub_fetch(&p->budget->live, (int64_t)s->capacity, __ATOMIC_RELAXED);
  }
  tvmrt_release(&p->hdr);
  obj->magic = 0;
  free(s);
}

/* a free buffer of exactly `size` bytes, or NULL; under mu */
static void* take_free(rx_pool* p, size_t size) {
  size_t i;
  for (i = p->num_free; i-- > 0;) {
    if (p->free_list[i].size == size) {
      void* data = p->free_list[i].data;
      p->free_list[i] = p->free_list[--p->num_free];
      p->free_bytes -= size;
      return data;
    }
  }
  return NULL;
}

rx_storage* tvmrt_rx_storage_alloc(rx_pool* p, uint64_t nbytes, const char* scope) {
  rx_storage* s;
  size_t size;
  void* data;
  if (scope != NULL && *scope && strcmp(scope, "global") != 0) {
    tvmrt_fail("UnsupportedError",
               "alloc_storage in memory scope '%.64s': tvmrt allocates the global scope only "
               "(texture scopes are for Adreno GPUs)",
               scope);
    return NULL;
  }
  if (p->max_storage >= 0 && nbytes > (uint64_t)p->max_storage) {
    tvmrt_fail("DeviceOutOfMemoryError",
               "alloc_storage of %llu bytes is over the limit of %lld bytes "
               "(TVMRT_RELAX_MAX_STORAGE_BYTES)",
               (unsigned long long)nbytes, (long long)p->max_storage);
    return NULL;
  }
  if (nbytes > ((uint64_t)1 << 48)) {
    tvmrt_fail("DeviceOutOfMemoryError", "alloc_storage of %llu bytes", (unsigned long long)nbytes);
    return NULL;
  }
  size = p->pooled ? ((size_t)nbytes + PAGE - 1) / PAGE * PAGE
                   : ((size_t)nbytes + RT_ALIGN - 1) / RT_ALIGN * RT_ALIGN;
  if (size == 0) size = RT_ALIGN;
  s = (rx_storage*)calloc(1, sizeof(rx_storage));
  if (s == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a storage");
    return NULL;
  }
  pthread_mutex_lock(&p->mu);
  data = take_free(p, size);
  if (data == NULL) {
    int64_t max = p->budget->max_live;
    if (max >= 0 && __atomic_load_n(&p->budget->live, __ATOMIC_RELAXED) + (int64_t)size > max)
      pool_trim(p); /* free buffers go before the budget refuses */
    pthread_mutex_unlock(&p->mu);
    if (tvmrt_rx_charge(p, (int64_t)size, "alloc_storage") != 0) {
      free(s);
      return NULL;
    }
    const tvmrt_device_backend* backend = tvmrt_device_backend_of(p->dev.device_type);
    if (backend != NULL) {
      if (backend->alloc(p->dev.device_id, size, &data) != 0) data = NULL;
    } else {
      data = aligned_alloc(RT_ALIGN, size);
      if (data == NULL) tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %zu bytes", size);
    }
    if (data == NULL) {
      tvmrt_rx_charge(p, -(int64_t)size, "alloc_storage");
      free(s);
      return NULL;
    }
  } else {
    pthread_mutex_unlock(&p->mu);
  }
  s->data = data;
  s->nbytes = (size_t)nbytes;
  s->capacity = size;
  s->dev = p->dev;
  memcpy(s->scope, "global", sizeof("global"));
  s->pool = p;
  tvmrt_retain(&p->hdr);
  tvmrt_object_init_unlisted(&s->hdr, RT_MAGIC_RX_STORAGE, storage_destroy); /* see rt.h */
  return s;
}
