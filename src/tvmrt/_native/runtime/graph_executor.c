/*
 * The graph executor's core: storage (one 64-byte aligned buffer per storage id, sized for
 * its largest entry, as TVM's SetupStorage), entry views, kernel binding (each op's
 * arguments built once: inputs then outputs, flattened when flatten_data) and run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph_executor.h"

#define MAX_ENTRY_BYTES (1ULL << 48) /* as the Python runtime's graph_types.MAX_ENTRY_BYTES */

static int entry_nbytes(const tvmrt_graph* g, size_t eid, size_t* out) {
  DLTensor t;
  DLDataType dt = g->dtypes[eid];
  unsigned bits = (unsigned)dt.bits * dt.lanes;
  if (bits % 8 != 0 && bits != 1 && bits != 4) {
    return tvmrt_fail("DataTypeError", "graph entry %zu: %u-bit elements are not supported", eid,
                      bits);
  }
  memset(&t, 0, sizeof(t));
  t.ndim = g->ndims[eid];
  t.shape = (int64_t*)&g->shapes[eid * RT_MAX_NDIM];
  t.dtype = dt;
  if (tvmrt_tensor_nbytes(&t, out) != 0 || *out >= MAX_ENTRY_BYTES) {
    char shape[256], dtype[64], took[32];
    tvmrt_ge_shape_text(&t, shape, sizeof(shape));
    tvmrt_dtype_text(dt, dtype, sizeof(dtype));
    if (tvmrt_tensor_nbytes(&t, out) != 0) {
      snprintf(took, sizeof(took), "over 2**64");
    } else {
      snprintf(took, sizeof(took), "%zu", *out);
    }
    return tvmrt_fail("GraphFormatError",
                      "graph JSON: attrs['shape'][%zu]: shape %s of %s takes %s bytes; no machine "
                      "can hold an entry of %llu bytes (2**48) or more",
                      eid, shape, dtype, took, (unsigned long long)MAX_ENTRY_BYTES);
  }
  return 0;
}

/* the Python runtime's check_host_memory: CPU pools larger than this machine's memory fail
   here, not when a lazily committed page is first touched */
static int host_memory_problem(const size_t* sizes, const DLDevice* devs, size_t n) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  double need = 0, have = (double)pages * (double)page;
  size_t sid;
  for (sid = 0; sid < n; ++sid) {
    if (devs[sid].device_type == kDLCPU) need += (double)((sizes[sid] + 3) / 4 * 4);
  }
  if (pages <= 0 || page <= 0 || need <= have) return 0;
  return tvmrt_fail("DeviceOutOfMemoryError",
                    "cannot create the graph executor: the storage plan needs %.1f GiB of host "
                    "memory, more than this machine's %.1f GiB",
                    need / 1073741824.0, have / 1073741824.0);
}

/* the executor's device for entries of device type `type` (TVM's SetupStorage: the first
   device of that type, else the first device) */
static DLDevice device_for_type(const graph_executor* ge, int type) {
  size_t i;
  for (i = 0; i < ge->num_devs; ++i) {
    if ((int)ge->devs[i].device_type == type) return ge->devs[i];
  }
  return ge->devs[0];
}

/* per storage id: its size and the device its entries are on (one device per pool, the
   Python plan's check and words) */
static int plan_pools(graph_executor* ge, size_t* sizes, DLDevice* pool_devs) {
  tvmrt_graph* g = &ge->g;
  int* types = (int*)calloc(g->num_storage ? g->num_storage : 1, sizeof(int));
  size_t eid, sid;
  if (types == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot plan storage");
  for (eid = 0; eid < g->num_entries; ++eid) {
    size_t n;
    int type = g->device_types != NULL ? g->device_types[eid] : (int)ge->dev.device_type;
    if (entry_nbytes(g, eid, &n) != 0) {
      free(types);
      return -1;
    }
    sid = (size_t)g->storage_ids[eid];
    if (types[sid] != 0 && types[sid] != type) {
      tvmrt_fail("GraphFormatError",
                 "graph JSON: storage pool %zu is assigned to entries on device types %d and %d "
                 "(entry %zu): The same pool entry cannot be assigned to multiple devices",
                 sid, types[sid], type, eid);
      free(types);
      return -1;
    }
    types[sid] = type;
    if (n > sizes[sid]) sizes[sid] = n;
  }
  for (sid = 0; sid < g->num_storage; ++sid) {
    int type = types[sid] != 0 ? types[sid] : (int)ge->dev.device_type;
    const tvmrt_device_backend* backend;
    pool_devs[sid] = device_for_type(ge, type);
    backend = tvmrt_device_backend_of(pool_devs[sid].device_type);
    if (type == kDLCPU && backend != NULL) { /* no cpu device given: CPU kernels cannot read it */
      tvmrt_fail("ArrayError",
                 "the graph places entries on the CPU (device_index 1), but no cpu device was "
                 "given and the fallback %s(%d) is device memory that CPU kernels cannot read; "
                 "pass the CPU too, e.g. [%s(%d), cpu(0)]",
                 backend->name, pool_devs[sid].device_id, backend->name, pool_devs[sid].device_id);
      free(types);
      return -1;
    }
  }
  free(types);
  return 0;
}

static int setup_storage(graph_executor* ge) {
  tvmrt_graph* g = &ge->g;
  size_t* sizes = (size_t*)calloc(g->num_storage ? g->num_storage : 1, sizeof(size_t));
  DLDevice* pool_devs = (DLDevice*)calloc(g->num_storage ? g->num_storage : 1, sizeof(DLDevice));
  size_t eid, sid;
  int rc = -1;
  if (sizes == NULL || pool_devs == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot plan storage");
    goto done;
  }
  if (plan_pools(ge, sizes, pool_devs) != 0) goto done;
  if (host_memory_problem(sizes, pool_devs, g->num_storage) != 0) goto done;
  ge->pool = (tvmrt_ndarray**)calloc(g->num_storage ? g->num_storage : 1, sizeof(void*));
  ge->entries = (DLTensor*)calloc(g->num_entries ? g->num_entries : 1, sizeof(DLTensor));
  ge->owners = (tvmrt_object**)calloc(g->num_entries ? g->num_entries : 1, sizeof(void*));
  if (ge->pool == NULL || ge->entries == NULL || ge->owners == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the storage table");
    goto done;
  }
  for (sid = 0; sid < g->num_storage; ++sid) {
    int64_t n = (int64_t)sizes[sid];
    DLDataType u8 = {kDLUInt, 8, 1};
    /* a refcounted array, so an executor sharing its params keeps the memory, not us */
    ge->pool[sid] = tvmrt_ndarray_empty_on(&n, 1, u8, pool_devs[sid]);
    if (ge->pool[sid] == NULL) {
      if (tvmrt_device_backend_of(pool_devs[sid].device_type) == NULL) { /* else its error */
        tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %zu bytes for storage %zu",
                   sizes[sid], sid);
      }
      goto done;
    }
  }
  for (eid = 0; eid < g->num_entries; ++eid) {
    DLTensor* t = &ge->entries[eid];
    tvmrt_ndarray* pool = ge->pool[g->storage_ids[eid]];
    t->data = pool->dl.data;
    ge->owners[eid] = &pool->hdr;
    t->device = pool->dl.device;
    t->ndim = g->ndims[eid];
    t->dtype = g->dtypes[eid];
    t->shape = &g->shapes[eid * RT_MAX_NDIM];
  }
  rc = 0;
done:
  free(sizes);
  free(pool_devs);
  return rc;
}

/* A kernel the library lacks (a tvm-ffi library's __tvm_ffi_<name> is found by its name:
   dso.c) */
static int missing_kernel(graph_executor* ge, const char* name) {
  (void)ge;
  return tvmrt_fail("FunctionNotFoundError", "no such function in module: %.200s", name);
}

static int setup_op(graph_executor* ge, uint32_t nid, tvmrt_ge_op* op) {
  const tvmrt_node* node = &ge->g.nodes[nid];
  size_t n = node->num_inputs + node->num_outputs, k;
  op->nid = nid;
  if (strcmp(node->func_name, "__nop") == 0) {
    op->kind = OP_NOP;
  } else if (strcmp(node->func_name, "__copy") == 0) {
    op->kind = OP_COPY;
    if (node->num_inputs != 1 || node->num_outputs != 1) {
      return tvmrt_fail("GraphFormatError", "node %u: __copy takes one input and one output", nid);
    }
  } else {
    op->kind = OP_KERNEL;
    op->func = tvmrt_module_get(ge->lib, node->func_name, 1);
    if (op->func == NULL) return missing_kernel(ge, node->func_name);
  }
  op->num_args = (int)n;
  op->args = (TVMValue*)calloc(n, sizeof(TVMValue));
  op->codes = (int*)calloc(n, sizeof(int));
  op->tensors = (DLTensor*)calloc(n, sizeof(DLTensor));
  op->flat_shapes = (int64_t*)calloc(n, sizeof(int64_t));
  op->eids = (uint32_t*)calloc(n, sizeof(uint32_t));
  if (!op->args || !op->codes || !op->tensors || !op->flat_shapes || !op->eids) {
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot bind node %u", nid);
  }
  for (k = 0; k < n; ++k) {
    uint32_t eid = k < node->num_inputs
                       ? tvmrt_graph_eid(&ge->g, node->inputs[k].nid, node->inputs[k].index)
                       : tvmrt_graph_eid(&ge->g, nid, (uint32_t)(k - node->num_inputs));
    op->eids[k] = eid;
    op->tensors[k] = ge->entries[eid];
    if (node->flatten_data) {
      int64_t count = 1;
      int d;
      for (d = 0; d < op->tensors[k].ndim; ++d) count *= op->tensors[k].shape[d];
      op->flat_shapes[k] = count;
      op->tensors[k].ndim = 1;
      op->tensors[k].shape = &op->flat_shapes[k];
    }
    op->args[k].v_handle = &op->tensors[k];
    op->codes[k] = kTVMDLTensorHandle;
  }
  return 0;
}

/* TVM 0.7/0.8 link-params: the library holds the weights, and `lookup`
   (_lookup_linked_param(storage_id)) gives the address of the constant data of a storage
   entry (NULL where it holds none). TVM 0.8's executor asked it for every storage id before
   allocating; the inputs it answers for are copied from there here, as params (TVM's
   get_input_info leaves them out), so a factory's or load_params' params still override. */
static int bind_linked_params(graph_executor* ge, tvmrt_func* lookup) {
  size_t i;
  for (i = 0; i < ge->g.num_args; ++i) {
    uint32_t eid = tvmrt_ge_input_eid(ge, i);
    TVMValue arg, ret;
    int code = kTVMArgInt, ret_code = kTVMNullptr;
    DLTensor src;
    arg.v_int64 = ge->g.storage_ids[eid];
    ret.v_handle = NULL;
    if (tvmrt_func_call(lookup, &arg, &code, 1, &ret, &ret_code) != 0) return -1;
    if (ret_code == kTVMNullptr || (ret_code == kTVMOpaqueHandle && ret.v_handle == NULL)) continue;
    if (ret_code != kTVMOpaqueHandle) {
      return tvmrt_fail("KernelError",
                        "_lookup_linked_param(%lld) returned a value of type code %d, expected "
                        "the address of the entry's data (a handle) or nothing",
                        (long long)arg.v_int64, ret_code);
    }
    src = ge->entries[eid];
    src.data = ret.v_handle;
    src.byte_offset = 0;
    src.device.device_type = kDLCPU; /* the library's own memory */
    src.device.device_id = 0;
    if (tvmrt_copy_tensor(&src, &ge->entries[eid]) != 0) return -1;
    ge->is_param[i] = 1;
  }
  return 0;
}

graph_executor* tvmrt_ge_create(const char* json, size_t len, tvmrt_module* lib,
                                const DLDevice* devs, size_t num_devs) {
  graph_executor* ge;
  tvmrt_func* linked;
  size_t nid, i;
  if (num_devs == 0 || num_devs > TVMRT_GE_MAX_DEVICES) {
    tvmrt_fail("InvalidArgumentError", "graph executor: %zu devices given, expected 1 to %d",
               num_devs, TVMRT_GE_MAX_DEVICES);
    return NULL;
  }
  for (i = 0; i < num_devs; ++i) {
    if (!tvmrt_device_supported(devs[i].device_type)) {
      tvmrt_fail("DeviceUnavailableError",
                 "graph executor: device type %d is not supported; libtvmrt_runtime runs graphs "
                 "on %s",
                 devs[i].device_type, tvmrt_device_backends());
      return NULL;
    }
    if (tvmrt_device_ready(devs[i].device_type, devs[i].device_id, "graph executor") != 0)
      return NULL;
  }
  ge = (graph_executor*)calloc(1, sizeof(graph_executor));
  if (ge != NULL) ge->last_executed = -1;
  if (ge == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a graph executor");
    return NULL;
  }
  ge->dev = devs[0];
  memcpy(ge->devs, devs, num_devs * sizeof(DLDevice));
  ge->num_devs = num_devs;
  ge->lib = lib;
  tvmrt_retain(&lib->hdr);
  if (tvmrt_graph_parse(json, len, &ge->g) != 0 || tvmrt_graph_check_plan(&ge->g) != 0) {
    goto fail;
  }
  ge->held = (tvmrt_object**)calloc(ge->g.num_args + ge->g.num_heads + 1, sizeof(void*));
  if (ge->held == NULL ||
      (ge->is_param = (unsigned char*)calloc(ge->g.num_args ? ge->g.num_args : 1, 1)) == NULL ||
      (ge->read_only = (unsigned char*)calloc(ge->g.num_args ? ge->g.num_args : 1, 1)) == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a graph executor");
    goto fail;
  }
  if (setup_storage(ge) != 0) goto fail;
  if ((linked = tvmrt_module_get(lib, "_lookup_linked_param", 1)) != NULL) {
    int rc = bind_linked_params(ge, linked);
    tvmrt_release(&linked->hdr);
    if (rc != 0) goto fail;
  }
  for (nid = 0; nid < ge->g.num_nodes; ++nid) ge->num_ops += ge->g.nodes[nid].is_op;
  ge->ops = (tvmrt_ge_op*)calloc(ge->num_ops ? ge->num_ops : 1, sizeof(tvmrt_ge_op));
  if (ge->ops == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %zu graph ops", ge->num_ops);
    ge->num_ops = 0;
    goto fail;
  }
  ge->num_ops = 0;
  for (nid = 0; nid < ge->g.num_nodes; ++nid) {
    if (!ge->g.nodes[nid].is_op) continue;
    if (setup_op(ge, (uint32_t)nid, &ge->ops[ge->num_ops++]) != 0) goto fail;
  }
  return ge;
fail:
  tvmrt_ge_destroy(ge);
  return NULL;
}

void tvmrt_ge_destroy(graph_executor* ge) {
  size_t i;
  if (ge == NULL) return;
  for (i = 0; i < ge->num_ops; ++i) {
    tvmrt_ge_op* op = &ge->ops[i];
    if (op->func != NULL) tvmrt_release(&op->func->hdr);
    free(op->args);
    free(op->codes);
    free(op->tensors);
    free(op->flat_shapes);
    free(op->eids);
  }
  free(ge->ops);
  if (ge->pool != NULL) {
    for (i = 0; i < ge->g.num_storage; ++i) {
      if (ge->pool[i] != NULL) tvmrt_release(&ge->pool[i]->hdr);
    }
  }
  free(ge->pool);
  free(ge->entries);
  free(ge->owners);
  for (i = 0; i < ge->num_shared; ++i) tvmrt_release(ge->shared[i]);
  free(ge->shared);
  free(ge->is_param);
  free(ge->read_only);
  free(ge->op_of);
  free(ge->blob);
  if (ge->held != NULL) {
    for (i = 0; i < ge->g.num_args + ge->g.num_heads; ++i) {
      if (ge->held[i] != NULL) tvmrt_release(ge->held[i]);
    }
  }
  free(ge->held);
  tvmrt_graph_free(&ge->g);
  tvmrt_release(&ge->lib->hdr);
  free(ge);
}

void tvmrt_ge_refresh(graph_executor* ge) {
  size_t i;
  int k;
  for (i = 0; i < ge->num_ops; ++i) {
    tvmrt_ge_op* op = &ge->ops[i];
    for (k = 0; k < op->num_args; ++k) op->tensors[k].data = ge->entries[op->eids[k]].data;
  }
}

int tvmrt_ge_run_op(graph_executor* ge, size_t i) {
  tvmrt_ge_op* op = &ge->ops[i];
  TVMValue ret;
  int ret_code = kTVMNullptr, rc;
  if (op->kind == OP_NOP) return 0;
  if (op->kind == OP_COPY) return tvmrt_copy_tensor(&op->tensors[0], &op->tensors[1]);
  tvmrt_clear_last_error();
  if (op->func->kind == RT_FN_BACKEND) {
    rc = op->func->backend(op->args, op->codes, op->num_args, &ret, &ret_code, NULL);
  } else {
    rc = TVMFuncCall(op->func, op->args, op->codes, op->num_args, &ret, &ret_code);
  }
  if (rc != 0) { /* the Python engine's words: where, then what the kernel said */
    const tvmrt_node* node = &ge->g.nodes[op->nid];
    char msg[1024];
    size_t len;
    snprintf(msg, sizeof(msg), "%s", tvmrt_peek_last_error());
    for (len = strlen(msg); len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == ' ');) {
      msg[--len] = '\0';
    }
    if (len == 0) {
      snprintf(msg, sizeof(msg), "function '%.200s' returned %d without setting an error message",
               node->func_name, rc);
    }
    return tvmrt_fail("KernelError", "node %u '%.200s' (kernel '%.200s'): %s", op->nid, node->name,
                      node->func_name, msg);
  }
  return 0;
}

int tvmrt_ge_enter(graph_executor* ge) {
  if (__atomic_exchange_n(&ge->running, 1, __ATOMIC_ACQUIRE) != 0) {
    return tvmrt_fail("TVMError",
                      "this graph executor is already running in another thread; use one "
                      "executor per thread (share weights between them with share_params)");
  }
  return 0;
}

int tvmrt_ge_leave(graph_executor* ge, int status) {
  __atomic_store_n(&ge->running, 0, __ATOMIC_RELEASE);
  return status;
}

int tvmrt_ge_run(graph_executor* ge) {
  size_t i;
  ge->last_executed = -1;
  for (i = 0; i < ge->num_ops; ++i) {
    if (tvmrt_ge_run_op(ge, i) != 0) return -1;
  }
  ge->last_executed = (int64_t)ge->g.num_nodes - 1;
  return 0;
}

int tvmrt_ge_rebind(graph_executor* ge, uint32_t eid, const DLTensor* ext, int share_storage,
                    tvmrt_object* owner) {
  const tvmrt_device_backend* backend = tvmrt_device_backend_of(ext->device.device_type);
  char* data = (char*)ext->data + ext->byte_offset;
  size_t e;
  if (ext->byte_offset != 0 && backend != NULL && !backend->handles_are_addresses) {
    return tvmrt_fail("ArrayError",
                      "zero copy of a %s array at byte offset %llu: its data handle is a buffer, "
                      "not an address, so kernels would read from byte 0; copy it instead",
                      backend->name, (unsigned long long)ext->byte_offset);
  }
  if (!share_storage) {
    ge->entries[eid].data = data;
    ge->owners[eid] = owner;
  } else {
    int64_t sid = ge->g.storage_ids[eid];
    for (e = 0; e < ge->g.num_entries; ++e) {
      if (ge->g.storage_ids[e] == sid) {
        ge->entries[e].data = data;
        ge->owners[e] = owner;
      }
    }
  }
  tvmrt_ge_refresh(ge);
  return 0;
}
