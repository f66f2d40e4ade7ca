/*
 * The object layer of the C runtime: reference counting, packed functions (the call behind
 * TVMFuncCall, TVMCFuncSetReturn, TVMFuncFree, TVMObjectRetain/Free) and the error text
 * (TVMGetLastError). globals.c points the backend services' function environment here.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relax.h"
#include "rt.h"

TVM_DLL const char* TVMGetLastError(void) { return tvmrt_peek_last_error(); }

/* ---------------------------------------------------------------------------------- */
/* reference counting                                                                  */

void tvmrt_retain(tvmrt_object* obj) {
  if (obj != NULL) __atomic_add_fetch(&obj->refs, 1, __ATOMIC_RELAXED);
}

/* Live objects: every object is in this set from tvmrt_object_init until its last release,
   so a handle freed twice (or used after its free) is found missing here and refused with
   an error, instead of its freed memory being read. Open addressing on the object's address;
   a reused address (a new object where a freed one was) cannot be told apart. */
#define LIVE_TOMB ((uintptr_t)1)
/* a spin lock, not a mutex: every object's birth and death takes it, and the section is a
   few probes long; a mutex's lock and unlock are two atomic operations and two calls, this
   is one exchange and a store (measured: bench/README.md, the Relax VM) */
static int g_live_mu;

static void live_lock(void) {
  unsigned spins = 0;
  while (__atomic_exchange_n(&g_live_mu, 1, __ATOMIC_ACQUIRE)) {
    while (__atomic_load_n(&g_live_mu, __ATOMIC_RELAXED)) {
      if (++spins % 64 == 0) sched_yield(); /* the holder was preempted */
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
}

static void live_unlock(void) { __atomic_store_n(&g_live_mu, 0, __ATOMIC_RELEASE); }
static uintptr_t* g_live;
static size_t g_live_cap, g_live_used, g_live_count; /* used: live objects and tombstones */

static size_t live_slot(uintptr_t key, size_t cap) {
  return (size_t)(((uint64_t)(key >> 4) * 0x9E3779B97F4A7C15ULL) >> 20) & (cap - 1);
}

static size_t live_find(uintptr_t key) { /* the slot holding key, or g_live_cap */
  size_t i, n;
  if (g_live_cap == 0 || key <= LIVE_TOMB) return g_live_cap; /* 1 is a tombstone, no key */
  for (i = live_slot(key, g_live_cap), n = 0; n < g_live_cap; i = (i + 1) & (g_live_cap - 1), ++n) {
    if (g_live[i] == key) return i;
    if (g_live[i] == 0) break;
  }
  return g_live_cap;
}

/* rebuild without tombstones, at least 4 slots per live object, so the next rebuild is at
   least cap / 4 registrations away (amortised O(1); the table never outgrows 8 slots per
   object of the peak, however many objects come and go) */
static int live_rehash(void) {
  size_t cap = g_live_cap ? g_live_cap : 1024, i;
  uintptr_t* table;
  while ((g_live_count + 1) * 4 > cap) cap *= 2;
  table = (uintptr_t*)calloc(cap, sizeof(uintptr_t));
  if (table == NULL) return -1;
  g_live_used = 0;
  for (i = 0; i < g_live_cap; ++i) {
    size_t j;
    if (g_live[i] <= LIVE_TOMB) continue;
    for (j = live_slot(g_live[i], cap); table[j] != 0; j = (j + 1) & (cap - 1)) {
    }
    table[j] = g_live[i];
    ++g_live_used;
  }
  free(g_live);
  g_live = table;
  g_live_cap = cap;
  return 0;
}

/* key into the live set; the lock is held. 0, or -1 when the table cannot grow */
static int live_insert(uintptr_t key) {
  size_t i;
  if ((g_live_used + 1) * 2 > g_live_cap && live_rehash() != 0) return -1;
  for (i = live_slot(key, g_live_cap); g_live[i] > LIVE_TOMB; i = (i + 1) & (g_live_cap - 1)) {
  }
  g_live_used += g_live[i] == 0;
  g_live[i] = key;
  ++g_live_count;
  return 0;
}

void tvmrt_object_init_unlisted(tvmrt_object* obj, uint32_t magic, void (*destroy)(tvmrt_object*)) {
  obj->magic = magic;
  obj->listed = 0;
  obj->refs = 1;
  obj->destroy = destroy;
}

int tvmrt_object_init(tvmrt_object* obj, uint32_t magic, void (*destroy)(tvmrt_object*)) {
  int rc;
  tvmrt_object_init_unlisted(obj, magic, destroy);
  live_lock();
  rc = live_insert((uintptr_t)obj);
  live_unlock();
  if (rc != 0) return tvmrt_fail("DeviceOutOfMemoryError", "cannot register an object");
  obj->listed = 1;
  return 0;
}

void tvmrt_object_publish(tvmrt_object* obj) {
  if (obj == NULL || __atomic_load_n(&obj->listed, __ATOMIC_ACQUIRE)) return;
  live_lock();
  if (!obj->listed && live_insert((uintptr_t)obj) == 0)
    __atomic_store_n(&obj->listed, 1, __ATOMIC_RELEASE);
  live_unlock();
}

uint32_t tvmrt_object_live_magic(const void* obj) {
  uint32_t magic = 0;
  if (obj == NULL) return 0;
  live_lock();
  if (live_find((uintptr_t)obj) < g_live_cap) magic = ((const tvmrt_object*)obj)->magic;
  live_unlock();
  return magic;
}

int tvmrt_object_live(const void* obj, uint32_t magic) {
  return obj != NULL && tvmrt_object_live_magic(obj) == magic;
}

int tvmrt_release_deferred(tvmrt_object* obj) {
  if (obj == NULL || __atomic_sub_fetch(&obj->refs, 1, __ATOMIC_ACQ_REL) != 0) return 0;
  if (__atomic_load_n(&obj->listed, __ATOMIC_ACQUIRE)) {
    size_t i;
    live_lock();
    i = live_find((uintptr_t)obj);
    if (i < g_live_cap) {
      g_live[i] = LIVE_TOMB;
      --g_live_count;
    }
    live_unlock();
  }
  return 1;
}

void tvmrt_release(tvmrt_object* obj) {
  if (tvmrt_release_deferred(obj)) obj->destroy(obj);
}

/* The object behind a handle of type code `code` (module, function, array), or NULL. */
static tvmrt_object* object_of(void* handle, int code) {
  if (handle == NULL) return NULL;
  switch (code) {
    case kTVMModuleHandle:
    case kTVMPackedFuncHandle:
    case kTVMObjectHandle: return (tvmrt_object*)handle;
    case kTVMNDArrayHandle: return &((tvmrt_ndarray*)handle)->hdr;
    default: return NULL;
  }
}

/* ---------------------------------------------------------------------------------- */
/* packed functions                                                                    */

static void func_destroy(tvmrt_object* obj) {
  tvmrt_func* f = (tvmrt_func*)obj;
  if (f->kind == RT_FN_C && f->fin != NULL) f->fin(f->self);
  tvmrt_release(f->owner);
  f->hdr.magic = 0;
  free(f);
}

static tvmrt_func* func_alloc(int kind, tvmrt_object* owner) {
  tvmrt_func* f = (tvmrt_func*)calloc(1, sizeof(tvmrt_func));
  if (f == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a packed function");
    return NULL;
  }
  if (tvmrt_object_init(&f->hdr, RT_MAGIC_FUNC, func_destroy) != 0) {
    free(f);
    return NULL;
  }
  f->kind = kind;
  f->owner = owner;
  tvmrt_retain(owner);
  return f;
}

tvmrt_func* tvmrt_func_new(tvmrt_fn fn, void* self, tvmrt_object* owner) {
  tvmrt_func* f = func_alloc(RT_FN_INTERNAL, owner);
  if (f != NULL) {
    f->fn = fn;
    f->self = self;
  }
  return f;
}

tvmrt_func* tvmrt_func_backend(TVMBackendPackedCFunc fn, tvmrt_object* owner) {
  tvmrt_func* f = func_alloc(RT_FN_BACKEND, owner);
  if (f != NULL) f->backend = fn;
  return f;
}

tvmrt_func* tvmrt_func_check(void* handle) {
  tvmrt_func* f = (tvmrt_func*)handle;
  if (!tvmrt_object_live(f, RT_MAGIC_FUNC)) {
    tvmrt_fail("ArgumentTypeError",
               "expected a PackedFunc handle, got %p (not a live function: freed already?)",
               handle);
    return NULL;
  }
  return f;
}

/* TVMCFuncSetReturn's target: where a C function's result goes. */
typedef struct {
  TVMValue* value;
  int* code;
} ret_slot;

int tvmrt_func_call(void* handle, TVMValue* args, int* codes, int num_args, TVMValue* ret,
                    int* ret_code) {
  tvmrt_func* f = tvmrt_func_check(handle);
  if (f == NULL) return -1;
  if (num_args < 0 || (num_args > 0 && (args == NULL || codes == NULL))) {
    return tvmrt_fail("InvalidArgumentError", "TVMFuncCall: %d arguments without their arrays",
                      num_args);
  }
  *ret_code = kTVMNullptr;
  ret->v_handle = NULL;
  switch (f->kind) {
    case RT_FN_INTERNAL: { /* the C runtime runs (its kernels' workspace is its own) */
      int was = tvmrt_runtime_caller(1), rc = f->fn(f->self, args, codes, num_args, ret, ret_code);
      tvmrt_runtime_caller(was);
      return rc;
    }
    case RT_FN_BACKEND: return f->backend(args, codes, num_args, ret, ret_code, NULL);
    default: { /* the host's function: its engine's workspace */
      ret_slot slot = {ret, ret_code};
      int was = tvmrt_runtime_caller(0), rc = f->cfunc(args, codes, num_args, &slot, f->self);
      tvmrt_runtime_caller(was);
      return rc;
    }
  }
}

TVM_DLL int TVMCFuncSetReturn(TVMRetValueHandle ret, TVMValue* value, int* type_code, int num_ret) {
  ret_slot* slot = (ret_slot*)ret;
  if (slot == NULL || value == NULL || type_code == NULL || num_ret != 1) {
    return tvmrt_fail("InvalidArgumentError", "TVMCFuncSetReturn: expected one return value");
  }
  *slot->code = type_code[0];
  if (type_code[0] == kTVMStr || type_code[0] == kTVMBytes) {
    /* as TVM: the text is copied, valid until the thread's next such return */
    static __thread char* text;
    static __thread TVMByteArray bytes;
    const TVMByteArray* in = (const TVMByteArray*)value[0].v_handle;
    const char* src = type_code[0] == kTVMStr ? value[0].v_str : in != NULL ? in->data : NULL;
    size_t n = src == NULL ? 0 : type_code[0] == kTVMStr ? strlen(src) : in->size;
    char* copy;
    if (src == NULL) return tvmrt_fail("InvalidArgumentError", "TVMCFuncSetReturn: null text");
    copy = (char*)malloc(n + 1);
    if (copy == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot copy a return value");
    memcpy(copy, src, n);
    copy[n] = '\0';
    free(text);
    text = copy;
    bytes.data = text;
    bytes.size = n;
    if (type_code[0] == kTVMStr) {
      slot->value->v_str = text;
    } else {
      slot->value->v_handle = &bytes;
    }
    return 0;
  }
  /* the caller keeps its reference; the receiver of the result gets one of its own */
  tvmrt_retain(object_of(value[0].v_handle, type_code[0]));
  *slot->value = value[0];
  return 0;
}

TVM_DLL int TVMCbArgToReturn(TVMValue* value, int* code) {
  (void)value;
  (void)code;
  return 0; /* arguments are handles already; nothing to convert */
}

tvmrt_func* tvmrt_func_c(TVMPackedCFunc fn, TVMPackedCFuncFinalizer fin, void* resource) {
  tvmrt_func* f = func_alloc(RT_FN_C, NULL);
  if (f != NULL) {
    f->cfunc = fn;
    f->fin = fin;
    f->self = resource;
  }
  return f;
}

TVM_DLL int TVMFuncFree(TVMFunctionHandle func) {
  tvmrt_func* f;
  if (func == NULL) return 0;
  f = tvmrt_func_check(func);
  if (f == NULL) return -1;
  tvmrt_release(&f->hdr);
  return 0;
}

/* an object a call hands to C code as kTVMObjectHandle: a module, a function, a Relay VM
   ADT, or one of the Relax VM's values (a string, shape, tuple, closure or storage; their
   magics only: relax_value.c is above this file) */
static int handed_out(const tvmrt_object* o) {
  switch (tvmrt_object_live_magic(o)) {
    case RT_MAGIC_FUNC:
    case RT_MAGIC_MODULE:
    case RT_MAGIC_ADT:
    case RT_MAGIC_RX_TUPLE:
    case RT_MAGIC_RX_MAP:
    case RT_MAGIC_RX_SHAPE:
    case RT_MAGIC_RX_STR:
    case RT_MAGIC_RX_CLOSURE:
    case RT_MAGIC_RX_STORAGE: return 1;
    default: return 0;
  }
}

TVM_DLL int TVMObjectRetain(TVMObjectHandle obj) {
  tvmrt_object* o = (tvmrt_object*)obj;
  if (o == NULL) return 0;
  if (!handed_out(o)) {
    return tvmrt_fail("ArgumentTypeError",
                      "TVMObjectRetain: %p is not a live module, function, ADT or Relax VM "
                      "object (freed already?)",
                      obj);
  }
  tvmrt_retain(o);
  return 0;
}

TVM_DLL int TVMObjectFree(TVMObjectHandle obj) {
  tvmrt_object* o = (tvmrt_object*)obj;
  if (o == NULL) return 0;
  if (!handed_out(o)) {
    return tvmrt_fail("ArgumentTypeError",
                      "TVMObjectFree: %p is not a live module, function, ADT or Relax VM object "
                      "(freed already?)",
                      obj);
  }
  tvmrt_release(o);
  return 0;
}

TVM_DLL int TVMByteArrayFree(TVMByteArray* arr) {
  if (arr == NULL) return 0;
  free((void*)arr->data);
  free(arr);
  return 0;
}
