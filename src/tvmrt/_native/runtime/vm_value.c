/*
 * The values Relay VM registers hold besides arrays: ADTs (tuples and constructors; handed
 * to C callers as kTVMObjectHandle), closures and storages, all reference counted objects;
 * a packed argument as an input value;
 * the VM's limits from the environment; and the allocator: a pool of freed host buffers
 * reused by (page-rounded size, alignment) as TVM's PooledAllocator, or none (naive), with
 * a budget on the bytes the VM holds at once, its free buffers included.
 */
#include <stdlib.h>
#include <string.h>

#include "vm.h"

#define PAGE 4096

static int64_t env_int(const char* name, int64_t fallback) {
  const char* s = getenv(name);
  char* end = NULL;
  long long v;
  if (s == NULL || *s == '\0') return fallback;
  v = strtoll(s, &end, 10);
  return (end != NULL && *end == '\0' && v >= 0) ? (int64_t)v : fallback;
}

void tvmrt_vm_limits_from_env(vm_limits* out) {
  out->max_frames = env_int("TVMRT_VM_MAX_FRAMES", 10000);
  if (out->max_frames == 0) out->max_frames = 10000;
  out->max_steps = env_int("TVMRT_VM_MAX_STEPS", 10000000); /* 0: no limit */
  out->max_alloc_bytes = env_int("TVMRT_VM_MAX_ALLOC_BYTES", -1);
  out->max_live_bytes = env_int("TVMRT_VM_MAX_LIVE_BYTES", -1);
}

/* ---------------------------------------------------------------------------------- */
/* ADTs and closures                                                                   */

static void fields_release(tvmrt_object** fields, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) tvmrt_release(fields[i]);
  free(fields);
}

static tvmrt_object** fields_copy(tvmrt_object* const* fields, size_t n) {
  tvmrt_object** out = (tvmrt_object**)calloc(n ? n : 1, sizeof(tvmrt_object*));
  size_t i;
  if (out == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %zu fields", n);
    return NULL;
  }
  for (i = 0; i < n; ++i) {
    out[i] = fields[i];
    tvmrt_retain(out[i]);
  }
  return out;
}

static void adt_destroy(tvmrt_object* obj);
static void closure_destroy(tvmrt_object* obj);

/* an ADT's or a closure's fields and worklist link; NULL for any other object */
static tvmrt_object** cells_of(tvmrt_object* obj, size_t* n, tvmrt_object*** next) {
  if (obj->destroy == adt_destroy) {
    vm_adt* a = (vm_adt*)obj;
    *n = a->size, *next = &a->next_dead;
    return a->fields;
  }
  if (obj->destroy == closure_destroy) {
    vm_closure* c = (vm_closure*)obj;
    *n = c->size, *next = &c->next_dead;
    return c->fields;
  }
  *n = 0, *next = NULL;
  return NULL;
}

/* frees `obj` (an ADT or a closure whose last reference is gone) and every cell only it
   held: the cells that die go on a worklist linked through their own next_dead, so a
   list of a million cells is freed in a loop, with no recursion and no allocation */
static void cells_free(tvmrt_object* obj) {
  tvmrt_object* todo = obj;
  tvmrt_object** link = NULL;
  size_t n = 0;
  cells_of(obj, &n, &link);
  *link = NULL;
  while (todo != NULL) {
    tvmrt_object* o = todo;
    tvmrt_object** fields = cells_of(o, &n, &link);
    size_t i;
    todo = *link;
    for (i = 0; i < n; ++i) {
      tvmrt_object* f = fields[i];
      tvmrt_object** f_link;
      size_t f_n;
      if (f != NULL && cells_of(f, &f_n, &f_link) != NULL) {
        if (tvmrt_release_deferred(f)) *f_link = todo, todo = f;
      } else {
        tvmrt_release(f); /* arrays and storages hold no cells */
      }
    }
    free(fields);
    if (o->destroy == adt_destroy) {
      tvmrt_vm_uncharge(((vm_adt*)o)->pool, ((vm_adt*)o)->charged);
      tvmrt_vm_pool_release(((vm_adt*)o)->pool);
    } else {
      tvmrt_vm_uncharge(((vm_closure*)o)->pool, ((vm_closure*)o)->charged);
      tvmrt_vm_pool_release(((vm_closure*)o)->pool);
    }
    o->magic = 0;
    free(o);
  }
}

static void adt_destroy(tvmrt_object* obj) { cells_free(obj); }

vm_adt* tvmrt_vm_adt_new(vm_pool* pool, int32_t tag, tvmrt_object* const* fields, size_t n) {
  vm_adt* a;
  size_t i, charged = 0;
  if (tvmrt_vm_charge(pool, VM_CELL_BYTES(sizeof(vm_adt), n), "AllocADT", &charged) != 0)
    return NULL;
  a = (vm_adt*)calloc(1, sizeof(vm_adt));
  if (a == NULL || (a->fields = fields_copy(fields, n)) == NULL) {
    free(a);
    tvmrt_vm_uncharge(pool, charged);
    if (a == NULL) tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate an ADT");
    return NULL;
  }
  a->charged = charged;
  a->pool = charged != 0 ? pool : NULL;
  if (a->pool != NULL) tvmrt_retain((tvmrt_object*)a->pool);
  a->tag = tag;
  a->size = n;
  for (i = 0; i < n && a->foreign == 0; ++i) {
    const tvmrt_object* f = fields[i];
    if (f == NULL || f->magic == RT_MAGIC_ARRAY) continue;
    a->foreign = f->magic == RT_MAGIC_ADT ? ((const vm_adt*)f)->foreign : f->magic;
  }
  if (tvmrt_object_init(&a->hdr, RT_MAGIC_ADT, adt_destroy) != 0) {
    fields_release(a->fields, n);
    tvmrt_vm_uncharge(a->pool, a->charged);
    tvmrt_vm_pool_release(a->pool);
    free(a);
    return NULL;
  }
  return a;
}

vm_adt* tvmrt_vm_adt_check(void* handle) {
  return tvmrt_object_live(handle, RT_MAGIC_ADT) ? (vm_adt*)handle : NULL;
}

static void closure_destroy(tvmrt_object* obj) { cells_free(obj); }

vm_closure* tvmrt_vm_closure_new(vm_pool* pool, int64_t func, tvmrt_object* const* fields,
                                 size_t n) {
  vm_closure* c;
  size_t charged = 0;
  if (tvmrt_vm_charge(pool, VM_CELL_BYTES(sizeof(vm_closure), n), "AllocClosure", &charged) != 0)
    return NULL;
  c = (vm_closure*)calloc(1, sizeof(vm_closure));
  if (c == NULL || (c->fields = fields_copy(fields, n)) == NULL) {
    free(c);
    tvmrt_vm_uncharge(pool, charged);
    if (c == NULL) tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a closure");
    return NULL;
  }
  c->func = func;
  c->size = n;
  c->charged = charged;
  c->pool = charged != 0 ? pool : NULL;
  if (c->pool != NULL) tvmrt_retain((tvmrt_object*)c->pool);
  if (tvmrt_object_init(&c->hdr, RT_MAGIC_VM_CLOSURE, closure_destroy) != 0) {
    fields_release(c->fields, n);
    tvmrt_vm_uncharge(c->pool, c->charged);
    tvmrt_vm_pool_release(c->pool);
    free(c);
    return NULL;
  }
  return c;
}

tvmrt_object* tvmrt_vm_array_obj(tvmrt_ndarray* a) { return &a->hdr; }

tvmrt_ndarray* tvmrt_vm_as_array(tvmrt_object* obj) {
  if (obj == NULL || obj->magic != RT_MAGIC_ARRAY) return NULL;
  return (tvmrt_ndarray*)((char*)obj - offsetof(tvmrt_ndarray, hdr));
}

int64_t tvmrt_vm_int_at(const tvmrt_ndarray* a, size_t i) {
  const char* p = (const char*)a->dl.data + a->dl.byte_offset;
  int s = a->dl.dtype.code == kDLInt;
  switch (a->dl.dtype.bits) {
    case 1:
    case 8: return s ? (int64_t)((const int8_t*)p)[i] : (int64_t)((const uint8_t*)p)[i];
    case 16: return s ? (int64_t)((const int16_t*)p)[i] : (int64_t)((const uint16_t*)p)[i];
    case 32: return s ? (int64_t)((const int32_t*)p)[i] : (int64_t)((const uint32_t*)p)[i];
    default: return ((const int64_t*)p)[i];
  }
}

const char* tvmrt_vm_kind(const tvmrt_object* obj) {
  if (obj == NULL) return "nothing";
  switch (obj->magic) {
    case RT_MAGIC_ARRAY: return "a tensor";
    case RT_MAGIC_ADT: return "an ADT";
    case RT_MAGIC_VM_CLOSURE: return "a closure";
    case RT_MAGIC_VM_STORAGE: return "a storage";
    default: return "an object";
  }
}

/* ---------------------------------------------------------------------------------- */
/* inputs                                                                              */

tvmrt_ndarray* tvmrt_vm_host_tensor(const DLTensor* dl, int index, int may_view) {
  tvmrt_ndarray* a;
  size_t nbytes;
  if (dl->device.device_type != kDLCPU || dl->ndim < 0 || dl->ndim > RT_MAX_NDIM) {
    tvmrt_fail("ArgumentTypeError", "input %d is not a CPU tensor of at most %d dims", index,
               RT_MAX_NDIM);
    return NULL;
  }
  if ((dl->ndim > 0 && dl->shape == NULL) || tvmrt_tensor_nbytes(dl, &nbytes) != 0 ||
      (dl->data == NULL && nbytes > 0)) {
    tvmrt_fail("ArgumentTypeError",
               "input %d: a DLTensor needs a shape (ndim %d) with no negative or too large "
               "dimension, and data",
               index, dl->ndim);
    return NULL;
  }
  if (may_view && tvmrt_is_compact(dl) && ((uintptr_t)dl->data + dl->byte_offset) % RT_ALIGN == 0)
    return tvmrt_ndarray_view(dl, NULL); /* TVM: NDArray::FromExternalDLTensor */
  a = tvmrt_ndarray_empty(dl->shape, dl->ndim, dl->dtype);
  if (a != NULL && tvmrt_copy_tensor(dl, &a->dl) != 0) {
    tvmrt_release(&a->hdr);
    a = NULL;
  }
  return a;
}

tvmrt_object* tvmrt_vm_input_value(TVMValue v, int code, int index) {
  if (code == kTVMNDArrayHandle) {
    tvmrt_ndarray* a = tvmrt_ndarray_from_handle(v.v_handle);
    if (a == NULL) return NULL;
    tvmrt_retain(&a->hdr);
    return &a->hdr;
  }
  if (code == kTVMDLTensorHandle && v.v_handle != NULL) {
    tvmrt_ndarray* a = tvmrt_vm_host_tensor((const DLTensor*)v.v_handle, index, 1);
    return a == NULL ? NULL : &a->hdr;
  }
  if (code == kTVMObjectHandle && tvmrt_vm_adt_check(v.v_handle) != NULL) {
    const vm_adt* t = (const vm_adt*)v.v_handle;
    if (t->foreign != 0) { /* its function index or allocator is another VM's */
      tvmrt_object kind;
      kind.magic = t->foreign;
      tvmrt_fail("ArgumentTypeError",
                 "input %d holds %s (a field of an ADT); a VM input holds tensors and ADTs of "
                 "tensors only: a closure or a storage belongs to the executable that made it",
                 index, tvmrt_vm_kind(&kind));
      return NULL;
    }
    tvmrt_retain((tvmrt_object*)v.v_handle);
    return (tvmrt_object*)v.v_handle;
  }
  tvmrt_fail("ArgumentTypeError",
             "input %d must be an NDArray, a DLTensor or an ADT, got type code %d", index, code);
  return NULL;
}

/* ---------------------------------------------------------------------------------- */
/* the allocator                                                                       */

typedef struct {
  void* data;
  size_t size, align;
} free_buf;

struct vm_pool {
  tvmrt_object hdr;
  pthread_mutex_t mu;
  int pooled;
  int64_t max_alloc, max_live;
  size_t live, free_bytes;
  free_buf* free_list;
  size_t num_free, cap_free;
};

static void pool_trim(vm_pool* p) { /* under p->mu */
  size_t i;
  for (i = 0; i < p->num_free; ++i) free(p->free_list[i].data);
  p->num_free = 0;
  p->free_bytes = 0;
}

static void pool_destroy(tvmrt_object* obj) {
  vm_pool* p = (vm_pool*)obj;
  pool_trim(p);
  free(p->free_list);
  pthread_mutex_destroy(&p->mu);
  p->hdr.magic = 0;
  free(p);
}

vm_pool* tvmrt_vm_pool_new(int pooled, const vm_limits* limits) {
  vm_pool* p = (vm_pool*)calloc(1, sizeof(vm_pool));
  if (p == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the VM's allocator");
    return NULL;
  }
  if (tvmrt_object_init(&p->hdr, RT_MAGIC_VM_POOL, pool_destroy) != 0) {
    free(p);
    return NULL;
  }
  pthread_mutex_init(&p->mu, NULL);
  p->pooled = pooled;
  p->max_alloc = limits->max_alloc_bytes;
  p->max_live = limits->max_live_bytes;
  return p;
}

void tvmrt_vm_pool_set_limits(vm_pool* p, const vm_limits* limits) {
  pthread_mutex_lock(&p->mu);
  p->max_alloc = limits->max_alloc_bytes;
  p->max_live = limits->max_live_bytes;
  pthread_mutex_unlock(&p->mu);
}

void tvmrt_vm_pool_release(vm_pool* pool) {
  if (pool != NULL) tvmrt_release(&pool->hdr);
}

static void storage_destroy(tvmrt_object* obj) {
  vm_storage* s = (vm_storage*)obj;
  vm_pool* p = s->pool;
  int kept = 0;
  pthread_mutex_lock(&p->mu);
  p->live -= s->charged;
  if (p->pooled) {
    if (p->num_free == p->cap_free) {
      size_t cap = p->cap_free ? p->cap_free * 2 : 16;
      free_buf* grown = (free_buf*)realloc(p->free_list, cap * sizeof(free_buf));
      if (grown != NULL) p->free_list = grown, p->cap_free = cap;
    }
    if (p->num_free < p->cap_free) {
      free_buf b = {s->data, s->capacity, s->align};
      p->free_list[p->num_free++] = b;
      p->free_bytes += s->capacity;
      kept = 1;
    }
  }
  pthread_mutex_unlock(&p->mu);
  if (!kept) free(s->data);
  tvmrt_release(&p->hdr);
  s->hdr.magic = 0;
  free(s);
}

/* a buffer of `size` bytes (a pooled one of that size and alignment when free); under mu */
static void* take_buffer(vm_pool* p, size_t size, size_t align) {
  size_t i;
  for (i = p->num_free; i-- > 0;) {
    if (p->free_list[i].size == size && p->free_list[i].align == align) {
      void* data = p->free_list[i].data;
      p->free_list[i] = p->free_list[--p->num_free];
      p->free_bytes -= size;
      return data;
    }
  }
  return aligned_alloc(align, size ? size : align);
}

vm_storage* tvmrt_vm_storage_alloc(vm_pool* p, int64_t nbytes, int64_t align) {
  vm_storage* s;
  size_t size;
  if (nbytes < 0) {
    tvmrt_fail("ArrayError", "AllocStorage of %lld bytes", (long long)nbytes);
    return NULL;
  }
  if (p->max_alloc >= 0 && nbytes > p->max_alloc) {
    tvmrt_fail("DeviceOutOfMemoryError",
               "AllocStorage of %lld bytes is over the limit of %lld bytes "
               "(TVMRT_VM_MAX_ALLOC_BYTES)",
               (long long)nbytes, (long long)p->max_alloc);
    return NULL;
  }
  if ((uint64_t)nbytes > SIZE_MAX - 2 * PAGE) {
    tvmrt_fail("DeviceOutOfMemoryError", "AllocStorage of %lld bytes", (long long)nbytes);
    return NULL;
  }
  size = p->pooled ? ((size_t)nbytes + PAGE - 1) / PAGE * PAGE
                   : ((size_t)nbytes + (size_t)align - 1) / (size_t)align * (size_t)align;
  s = (vm_storage*)calloc(1, sizeof(vm_storage));
  if (s == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a storage");
    return NULL;
  }
  pthread_mutex_lock(&p->mu);
  if (p->max_live >= 0) {
    if (p->live + (size_t)nbytes > (size_t)p->max_live) {
      size_t live = p->live;
      pthread_mutex_unlock(&p->mu);
      free(s);
      tvmrt_fail("DeviceOutOfMemoryError",
                 "AllocStorage of %lld bytes: the VM would hold %zu bytes at once, over its "
                 "budget of %lld bytes (TVMRT_VM_MAX_LIVE_BYTES)",
                 (long long)nbytes, live + (size_t)nbytes, (long long)p->max_live);
      return NULL;
    }
    if (p->live + p->free_bytes + (size_t)nbytes > (size_t)p->max_live) pool_trim(p);
    s->charged = (size_t)nbytes;
    p->live += s->charged;
  }
  s->data = take_buffer(p, size, (size_t)align);
  if (s->data == NULL) {
    p->live -= s->charged;
    pthread_mutex_unlock(&p->mu);
    free(s);
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %lld bytes for AllocStorage",
               (long long)nbytes);
    return NULL;
  }
  pthread_mutex_unlock(&p->mu);
  s->nbytes = (size_t)nbytes;
  s->capacity = size;
  s->align = (size_t)align;
  s->pool = p;
  tvmrt_retain(&p->hdr);
  if (tvmrt_object_init(&s->hdr, RT_MAGIC_VM_STORAGE, storage_destroy) != 0) {
    s->charged = 0; /* storage_destroy's work, by hand: nothing was charged that stays */
    pthread_mutex_lock(&p->mu);
    p->live -= (size_t)(p->max_live >= 0 ? nbytes : 0);
    pthread_mutex_unlock(&p->mu);
    free(s->data);
    tvmrt_release(&p->hdr);
    free(s);
    return NULL;
  }
  return s;
}

int tvmrt_vm_charge(vm_pool* p, size_t bytes, const char* what, size_t* charged) {
  *charged = 0;
  if (p == NULL) return 0;
  pthread_mutex_lock(&p->mu);
  if (p->max_live < 0) {
    pthread_mutex_unlock(&p->mu);
    return 0;
  }
  if (p->live + bytes > (size_t)p->max_live) {
    size_t live = p->live;
    pthread_mutex_unlock(&p->mu);
    return tvmrt_fail("DeviceOutOfMemoryError",
                      "%s of %zu bytes: the VM would hold %zu bytes at once, over its budget of "
                      "%lld bytes (TVMRT_VM_MAX_LIVE_BYTES)",
                      what, bytes, live + bytes, (long long)p->max_live);
  }
  if (p->live + p->free_bytes + bytes > (size_t)p->max_live) pool_trim(p);
  p->live += bytes;
  *charged = bytes;
  pthread_mutex_unlock(&p->mu);
  return 0;
}

void tvmrt_vm_uncharge(vm_pool* p, size_t charged) {
  if (p == NULL || charged == 0) return;
  pthread_mutex_lock(&p->mu);
  p->live -= charged;
  pthread_mutex_unlock(&p->mu);
}

static void array_uncharge(tvmrt_object* pool, size_t charged) {
  tvmrt_vm_uncharge((vm_pool*)pool, charged);
  tvmrt_release(pool);
}

int tvmrt_vm_charge_array(vm_pool* p, tvmrt_object* array, const char* what) {
  tvmrt_ndarray* a = (tvmrt_ndarray*)((char*)array - offsetof(tvmrt_ndarray, hdr));
  size_t bytes = VM_CELL_BYTES(sizeof(tvmrt_ndarray), 0), data = 0, charged = 0;
  if (a->alloc != NULL && tvmrt_tensor_nbytes(&a->dl, &data) == 0) bytes += data;
  if (tvmrt_vm_charge(p, bytes, what, &charged) != 0) return -1;
  if (charged == 0) return 0;
  a->uncharge = array_uncharge;
  a->charged_to = &p->hdr;
  a->charged = charged;
  tvmrt_retain(&p->hdr);
  return 0;
}
