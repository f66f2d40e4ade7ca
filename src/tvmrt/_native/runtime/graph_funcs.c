/*
 * The packed functions of the graph executor module (TVM's GraphExecutor::GetFunction):
 * set_input, set_input_zero_copy, set_output_zero_copy, run, run_from_inputs, get_output,
 * get_input, get_num_inputs, get_num_outputs, get_input_index, get_output_index,
 * get_input_info, get_output_info (Maps, as TVM's), load_params, load_params_from_file,
 * share_params.
 *
 * Errors use the Python runtime's words. As the Python runtime (and unlike TVM's C++),
 * set_input refuses a name the graph lacks and an array of another shape or dtype.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_executor.h"
#include "relax.h"

#define GE(self) ((graph_executor*)((tvmrt_module*)(self))->impl)

static void input_names(const graph_executor* ge, char* buf, size_t n) {
  size_t i, off = 0;
  off += (size_t)snprintf(buf, n, "[");
  for (i = 0; i < ge->g.num_args && i < 10 && off < n; ++i) {
    off += (size_t)snprintf(buf + off, n - off, "%s'%.60s'", i ? ", " : "",
                            ge->g.nodes[ge->g.arg_nodes[i]].name);
  }
  if (i < ge->g.num_args && off < n) {
    off += (size_t)snprintf(buf + off, n - off, ", ... (%zu in all)", ge->g.num_args);
  }
  if (off < n) snprintf(buf + off, n - off, "]");
}

static DLTensor* arg_tensor(TVMValue* args, int* codes, int i, const char* fn) {
  if (codes[i] != kTVMDLTensorHandle && codes[i] != kTVMNDArrayHandle) {
    tvmrt_fail("ArgumentTypeError",
               "%s: argument %d must be an array (DLTensor or NDArray), got "
               "type code %d",
               fn, i, codes[i]);
    return NULL;
  }
  if (args[i].v_handle == NULL) tvmrt_fail("ArgumentTypeError", "%s: argument %d is null", fn, i);
  return (DLTensor*)args[i].v_handle;
}

/* a key that is neither a name nor an index, in the Python runtime's words; -2 */
static int key_type_error(const char* what, TVMValue v, int code) {
  char value[300];
  tvmrt_py_value_words(v, code, value, sizeof(value));
  tvmrt_fail("ArgumentTypeError", "%s key must be a name or an index, got %s", what, value);
  return -2;
}

/* An input key (name or index) -> index; -2 with an error set, -1 for an unknown name when
   `unknown_ok`. */
static int input_key(graph_executor* ge, TVMValue* args, int* codes, int unknown_ok) {
  if (codes[0] == kTVMStr) {
    int idx = tvmrt_ge_input_index(ge, args[0].v_str);
    if (idx < 0 && !unknown_ok) {
      char names[800];
      input_names(ge, names, sizeof(names));
      tvmrt_fail("InputNotFoundError", "graph has no input '%.200s'; inputs are %s", args[0].v_str,
                 names);
      return -2;
    }
    return idx;
  }
  if (codes[0] == kTVMArgInt) { /* a negative index is out of range (TVM fails an ICHECK) */
    if (args[0].v_int64 < 0 || (uint64_t)args[0].v_int64 >= ge->g.num_args) {
      tvmrt_fail("InputIndexError", "input index %lld is out of range: the graph has %zu input%s",
                 (long long)args[0].v_int64, ge->g.num_args, ge->g.num_args == 1 ? "" : "s");
      return -2;
    }
    return (int)args[0].v_int64;
  }
  return key_type_error("input", args[0], codes[0]);
}

/* TVM's key of output `i` in get_output_info: the node's name, with ":index" when the node
   gives several outputs (a new string, NULL with an error when out of memory) */
static char* output_info_key(const graph_executor* ge, size_t i) {
  size_t j, same = 0, n;
  const tvmrt_entry_ref* h = &ge->g.heads[i];
  const char* name = ge->g.nodes[h->nid].name;
  char* key;
  for (j = 0; j < ge->g.num_heads; ++j) same += ge->g.heads[j].nid == h->nid;
  n = strlen(name) + 12;
  if ((key = (char*)malloc(n)) == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "get_output_info: out of memory");
    return NULL;
  }
  if (same == 1) {
    snprintf(key, n, "%s", name);
  } else {
    snprintf(key, n, "%s:%u", name, (unsigned)h->index);
  }
  return key;
}

/* the output index of a name: "node:index" (the last such head), else a bare node name (the
   last head of that node), as the Python runtime; -1 if none */
static int output_of_name(const graph_executor* ge, const char* name) {
  size_t i, len;
  int found = -1;
  for (i = 0; i < ge->g.num_heads; ++i) {
    const char* node = ge->g.nodes[ge->g.heads[i].nid].name;
    char* end;
    len = strlen(node);
    if (strncmp(name, node, len) == 0 && name[len] == ':' && name[len + 1] >= '0' &&
        name[len + 1] <= '9' && strtoul(name + len + 1, &end, 10) == ge->g.heads[i].index &&
        *end == '\0') {
      found = (int)i;
    }
  }
  if (found >= 0) return found;
  for (i = 0; i < ge->g.num_heads; ++i) {
    if (strcmp(ge->g.nodes[ge->g.heads[i].nid].name, name) == 0) found = (int)i;
  }
  return found;
}

static void output_names(const graph_executor* ge, char* buf, size_t n) {
  size_t i, off = 0;
  off += (size_t)snprintf(buf, n, "[");
  for (i = 0; i < ge->g.num_heads && i < 10 && off < n; ++i) {
    off += (size_t)snprintf(buf + off, n - off, "%s'%.60s:%u'", i ? ", " : "",
                            ge->g.nodes[ge->g.heads[i].nid].name, (unsigned)ge->g.heads[i].index);
  }
  if (i < ge->g.num_heads && off < n) {
    off += (size_t)snprintf(buf + off, n - off, ", ... (%zu in all)", ge->g.num_heads);
  }
  if (off < n) snprintf(buf + off, n - off, "]");
}

static int output_index(graph_executor* ge, TVMValue* args, int* codes) {
  if (codes[0] == kTVMStr) {
    int found = output_of_name(ge, args[0].v_str);
    if (found < 0) {
      char names[800];
      output_names(ge, names, sizeof(names));
      tvmrt_fail("InputNotFoundError", "graph has no output '%.200s'; outputs are %s",
                 args[0].v_str, names);
    }
    return found < 0 ? -2 : found;
  }
  if (codes[0] != kTVMArgInt) return key_type_error("output", args[0], codes[0]);
  if (args[0].v_int64 < 0 || (uint64_t)args[0].v_int64 >= ge->g.num_heads) {
    tvmrt_fail("InputIndexError", "output index %lld is out of range: the graph has %zu output%s",
               (long long)args[0].v_int64, ge->g.num_heads, ge->g.num_heads == 1 ? "" : "s");
    return -2;
  }
  return (int)args[0].v_int64;
}

static int layout_error(const char* label, const DLTensor* want, const DLTensor* got) {
  char ws[256], wd[64], gs[256], gd[64];
  tvmrt_ge_shape_text(want, ws, sizeof(ws));
  tvmrt_ge_shape_text(got, gs, sizeof(gs));
  tvmrt_dtype_text(want->dtype, wd, sizeof(wd));
  tvmrt_dtype_text(got->dtype, gd, sizeof(gd));
  return tvmrt_fail("ArrayError", "%s expects shape %s and dtype %s, got shape %s and dtype %s",
                    label, ws, wd, gs, gd);
}

static int f_set_input(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  graph_executor* ge = GE(self);
  DLTensor *src, *dst;
  char label[300];
  int idx;
  if (tvmrt_arity("set_input", n, 2, 2) != 0 || (idx = input_key(ge, args, codes, 0)) < 0)
    return -1;
  if ((src = arg_tensor(args, codes, 1, "set_input")) == NULL) return -1;
  if (tvmrt_ge_writable_input(ge, (size_t)idx) != 0) return -1;
  dst = &ge->entries[tvmrt_ge_input_eid(ge, (size_t)idx)];
  snprintf(label, sizeof(label), "input '%.200s'", ge->g.nodes[ge->g.arg_nodes[idx]].name);
  if (!tvmrt_ge_same_layout(src, dst)) return layout_error(label, dst, src);
  return tvmrt_copy_tensor(src, dst);
}

/* the optional third argument of a zero-copy binding (tvmrt's; TVM takes two): nonzero when
   the caller's memory is read-only (a numpy array with writeable=False, a read-only mapping),
   which the C runtime cannot see for itself */
static int read_only_arg(TVMValue* args, int* codes, int n, const char* fn, int* out) {
  *out = 0;
  if (n < 3) return 0;
  if (codes[2] != kTVMArgInt) {
    return tvmrt_fail("ArgumentTypeError",
                      "%s: the third argument (read-only) must be an int, got type code %d", fn,
                      codes[2]);
  }
  *out = args[2].v_int64 != 0;
  return 0;
}

/* Rebind entry `eid` to argument 1 zero-copy, keeping its array: when it is one of this
   runtime's arrays (an NDArray handle), a reference in slot `slot` replaces the one held
   before, so its memory lives as long as the binding, as the Python engine keeps the
   NDArray it was given; a bare DLTensor stays the caller's to keep alive, as in TVM. */
static int bind_kept(graph_executor* ge, uint32_t eid, int share_storage, size_t slot,
                     TVMValue* args, int* codes) {
  tvmrt_object* owner = NULL;
  if (codes[1] == kTVMNDArrayHandle) { /* the handle is the array's DLTensor, its first member */
    tvmrt_object* hdr = &((tvmrt_ndarray*)args[1].v_handle)->hdr;
    if (tvmrt_object_live(hdr, RT_MAGIC_ARRAY)) owner = hdr;
  }
  tvmrt_retain(owner);
  if (tvmrt_ge_rebind(ge, eid, (const DLTensor*)args[1].v_handle, share_storage, owner) != 0) {
    if (owner != NULL) tvmrt_release(owner);
    return -1;
  }
  if (ge->held[slot] != NULL) tvmrt_release(ge->held[slot]); /* no entry views it now */
  ge->held[slot] = owner;
  return 0;
}

static int f_set_input_zero_copy(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                                 int* rc) {
  graph_executor* ge = GE(self);
  DLTensor* src;
  char label[300];
  uint32_t eid;
  int idx, read_only;
  if (tvmrt_arity("set_input_zero_copy", n, 2, 3) != 0) return -1;
  if ((idx = input_key(ge, args, codes, 0)) < 0) return -1;
  if ((src = arg_tensor(args, codes, 1, "set_input_zero_copy")) == NULL) return -1;
  if (read_only_arg(args, codes, n, "set_input_zero_copy", &read_only) != 0) return -1;
  eid = tvmrt_ge_input_eid(ge, (size_t)idx);
  snprintf(label, sizeof(label), "zero-copy input '%.200s'",
           ge->g.nodes[ge->g.arg_nodes[idx]].name);
  if (tvmrt_ge_external_problem(&ge->entries[eid], src, label) != 0) return -1;
  if (bind_kept(ge, eid, 1, (size_t)idx, args, codes) != 0) return -1;
  ge->read_only[idx] = (unsigned char)read_only; /* no kernel writes an input */
  return 0;
}

static int f_set_output_zero_copy(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                                  int* rc) {
  graph_executor* ge = GE(self);
  DLTensor* dst;
  uint32_t eid;
  const tvmrt_node* node;
  char label[64];
  int idx, read_only;
  if (tvmrt_arity("set_output_zero_copy", n, 2, 3) != 0) return -1;
  if ((idx = output_index(ge, args, codes)) < 0) return -1;
  if ((dst = arg_tensor(args, codes, 1, "set_output_zero_copy")) == NULL) return -1;
  if (read_only_arg(args, codes, n, "set_output_zero_copy", &read_only) != 0) return -1;
  if (read_only) { /* checked first, as the Python runtime does */
    return tvmrt_fail("ArrayError",
                      "zero-copy output %d: the array is read-only (a read-only mapping, "
                      "immutable bytes or writeable=False), but kernels write this entry; pass "
                      "writable memory",
                      idx);
  }
  eid = tvmrt_ge_output_eid(ge, (size_t)idx);
  snprintf(label, sizeof(label), "zero-copy output %d", idx);
  if (tvmrt_ge_external_problem(&ge->entries[eid], dst, label) != 0) return -1;
  node = &ge->g.nodes[ge->g.heads[idx].nid];
  if (node->is_op && strcmp(node->func_name, "__nop") == 0 && node->num_inputs == 1) {
    /* a reshape head: the real producer must write into the user's buffer */
    eid = tvmrt_graph_eid(&ge->g, node->inputs[0].nid, node->inputs[0].index);
    node = &ge->g.nodes[node->inputs[0].nid];
  }
  if (!node->is_op) {
    return tvmrt_fail("ArrayError",
                      "zero-copy output %d is a graph input (or a reshape of one), so no kernel "
                      "writes it; read it with get_output instead",
                      idx);
  }
  return bind_kept(ge, eid, 0, ge->g.num_args + (size_t)idx, args, codes);
}

static int f_run(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  graph_executor* ge = GE(self);
  if (tvmrt_arity("run", n, 0, 0) != 0) return -1;
  if (tvmrt_ge_enter(ge) != 0) return -1;
  return tvmrt_ge_leave(ge, tvmrt_ge_run(ge));
}

static int give_array(void* self, const DLTensor* t, TVMValue* ret, int* rc) {
  tvmrt_ndarray* view = tvmrt_ndarray_view(t, &((tvmrt_module*)self)->hdr);
  if (view == NULL) return -1;
  ret->v_handle = &view->dl;
  *rc = kTVMNDArrayHandle;
  return 0;
}

/* the Python runtime's copy_out: `out` must have the entry's shape and dtype */
static int copy_out(const DLTensor* from, TVMValue* args, int* codes, const char* fn) {
  DLTensor* out = arg_tensor(args, codes, 1, fn);
  if (out == NULL) return -1;
  if (!tvmrt_ge_same_layout(from, out)) {
    char key[256], os[256], od[64], fs[256], fd[64];
    if (codes[0] == kTVMStr) {
      snprintf(key, sizeof(key), "'%.200s'", args[0].v_str);
    } else {
      snprintf(key, sizeof(key), "%lld", (long long)args[0].v_int64);
    }
    tvmrt_ge_shape_text(out, os, sizeof(os));
    tvmrt_dtype_text(out->dtype, od, sizeof(od));
    tvmrt_ge_shape_text(from, fs, sizeof(fs));
    tvmrt_dtype_text(from->dtype, fd, sizeof(fd));
    return tvmrt_fail("ArrayError",
                      "%s(%s): out has shape %s and dtype %s, expected shape %s and dtype %s", fn,
                      key, os, od, fs, fd);
  }
  return tvmrt_copy_tensor(from, out);
}

static int f_get_output(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  graph_executor* ge = GE(self);
  const DLTensor* t;
  int idx;
  if (tvmrt_arity("get_output", n, 1, 2) != 0) return -1;
  if ((idx = output_index(ge, args, codes)) < 0) return -1;
  t = &ge->entries[tvmrt_ge_output_eid(ge, (size_t)idx)];
  return n == 2 ? copy_out(t, args, codes, "get_output") : give_array(self, t, ret, rc);
}

static int f_get_input(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  graph_executor* ge = GE(self);
  const DLTensor* t;
  int idx;
  if (tvmrt_arity("get_input", n, 1, 2) != 0) return -1;
  idx = input_key(ge, args, codes, 1);
  if (idx == -2) return -1;
  if (idx == -1) return 0; /* as TVM: an unknown name gives None */
  t = &ge->entries[tvmrt_ge_input_eid(ge, (size_t)idx)];
  return n == 2 ? copy_out(t, args, codes, "get_input") : give_array(self, t, ret, rc);
}

static int f_get_num_outputs(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                             int* rc) {
  ret->v_int64 = (int64_t)GE(self)->g.num_heads;
  *rc = kTVMArgInt;
  return tvmrt_arity("get_num_outputs", n, 0, 0);
}

static int f_get_num_inputs(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  ret->v_int64 = (int64_t)GE(self)->g.num_args;
  *rc = kTVMArgInt;
  return tvmrt_arity("get_num_inputs", n, 0, 0);
}

/* the one argument of get_input_index / get_output_index: a name (`what`: input, output) */
static int name_arg(const char* fn, const char* what, int n, const int* codes) {
  if (tvmrt_arity(fn, n, 1, 1) != 0) return -1;
  if (codes[0] == kTVMStr) return 0;
  return tvmrt_fail("ArgumentTypeError", "%s key must be a str, got %s", what,
                    tvmrt_py_type_name(codes[0]));
}

static int f_get_input_index(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                             int* rc) {
  if (name_arg("get_input_index", "input", n, codes) != 0) return -1;
  ret->v_int64 = tvmrt_ge_input_index(GE(self), args[0].v_str);
  *rc = kTVMArgInt;
  return 0;
}

static int f_get_output_index(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                              int* rc) {
  if (name_arg("get_output_index", "output", n, codes) != 0) return -1;
  ret->v_int64 = output_of_name(GE(self), args[0].v_str);
  *rc = kTVMArgInt;
  return 0;
}

/* get_input_info / get_output_info: {"shape": {name: ShapeTuple}, "dtype": {name: String}},
   TVM's Map<String, ObjectRef>; inputs loaded or shared as params are left out, as TVM */
static int info_map(graph_executor* ge, int outputs, TVMValue* ret, int* rc) {
  size_t count = outputs ? ge->g.num_heads : ge->g.num_args, i, used = 0, pairs = 0;
  rx_tuple* shapes = tvmrt_rx_map_new(count);
  rx_tuple* dtypes = shapes != NULL ? tvmrt_rx_map_new(count) : NULL;
  rx_tuple* info = dtypes != NULL ? tvmrt_rx_map_new(2) : NULL;
  if (info == NULL) goto fail;
  for (i = 0; i < count; ++i) {
    const DLTensor* t;
    char dtype[64], *made = NULL;
    const char* key;
    rx_shape* shape;
    rx_str* text;
    int status;
    if (!outputs && ge->is_param[i]) continue;
    t = &ge->entries[outputs ? tvmrt_ge_output_eid(ge, i) : tvmrt_ge_input_eid(ge, i)];
    key = outputs ? (made = output_info_key(ge, i)) : ge->g.nodes[ge->g.arg_nodes[i]].name;
    if (key == NULL) goto fail;
    tvmrt_dtype_text(t->dtype, dtype, sizeof(dtype));
    shape = tvmrt_rx_shape_new(t->shape, (size_t)t->ndim);
    status = shape == NULL
                 ? -1
                 : tvmrt_rx_map_set(shapes, &used, key, tvmrt_rx_object(RX_SHAPE, &shape->hdr));
    if (status == 0) {
      text = tvmrt_rx_str_new(dtype, strlen(dtype));
      status = text == NULL
                   ? -1
                   : tvmrt_rx_map_set(dtypes, &pairs, key, tvmrt_rx_object(RX_STR, &text->hdr));
    }
    free(made);
    if (status != 0) goto fail;
  }
  shapes->size = 2 * used; /* names given twice (the last wins) leave unused pairs */
  dtypes->size = 2 * pairs;
  used = 0;
  if (tvmrt_rx_map_set(info, &used, "shape", tvmrt_rx_object(RX_MAP, &shapes->hdr)) != 0) {
    shapes = NULL;
    goto fail;
  }
  if (tvmrt_rx_map_set(info, &used, "dtype", tvmrt_rx_object(RX_MAP, &dtypes->hdr)) != 0) {
    tvmrt_release(&info->hdr);
    return -1;
  }
  ret->v_handle = &info->hdr;
  *rc = kTVMObjectHandle;
  return 0;
fail:
  if (shapes != NULL) tvmrt_release(&shapes->hdr);
  if (dtypes != NULL) tvmrt_release(&dtypes->hdr);
  if (info != NULL) tvmrt_release(&info->hdr);
  return -1;
}

static int f_get_input_info(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  (void)args, (void)codes;
  if (tvmrt_arity("get_input_info", n, 0, 0) != 0) return -1;
  return info_map(GE(self), 0, ret, rc);
}

static int f_get_output_info(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                             int* rc) {
  (void)args, (void)codes;
  if (tvmrt_arity("get_output_info", n, 0, 0) != 0) return -1;
  return info_map(GE(self), 1, ret, rc);
}

/* run_from_inputs(dev_type, dev_id, key, value, ...): set the inputs, run, and give every
   output copied to that (host) device, as an Array (TVM's RunFromInputs) */
static int f_run_from_inputs(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                             int* rc) {
  graph_executor* ge = GE(self);
  DLDevice host;
  rx_tuple* outs;
  size_t i;
  int k;
  if (n < 2 || tvmrt_device_args(args, codes, 0, n, &host, "run_from_inputs") != 0) {
    return n < 2 ? tvmrt_fail("InvalidArgumentError",
                              "run_from_inputs takes a device (type, id) and key-value pairs")
                 : -1;
  }
  if ((n - 2) % 2 != 0) {
    return tvmrt_fail("InvalidArgumentError",
                      "Number of arguments to run_from_inputs must be an even number of "
                      "key-value pairs");
  }
  for (k = 2; k < n; k += 2) {
    TVMValue pair[2];
    int pair_codes[2];
    TVMValue none;
    int none_code;
    pair[0] = args[k], pair[1] = args[k + 1];
    pair_codes[0] = codes[k], pair_codes[1] = codes[k + 1];
    if (f_set_input(self, pair, pair_codes, 2, &none, &none_code) != 0) return -1;
  }
  if (f_run(self, NULL, NULL, 0, NULL, NULL) != 0) return -1;
  if ((outs = tvmrt_rx_tuple_new(ge->g.num_heads)) == NULL) return -1;
  for (i = 0; i < ge->g.num_heads; ++i) {
    const DLTensor* t = &ge->entries[tvmrt_ge_output_eid(ge, i)];
    tvmrt_ndarray* copy = tvmrt_ndarray_empty_on(t->shape, t->ndim, t->dtype, host);
    if (copy == NULL || tvmrt_copy_tensor(t, &copy->dl) != 0) {
      if (copy != NULL) tvmrt_release(&copy->hdr);
      tvmrt_release(&outs->hdr);
      return -1;
    }
    outs->items[i] = tvmrt_rx_object(RX_TENSOR, &copy->hdr);
  }
  ret->v_handle = &outs->hdr;
  *rc = kTVMObjectHandle;
  return 0;
}

static const TVMByteArray* arg_bytes(TVMValue* args, int* codes, int i, const char* fn) {
  if (codes[i] != kTVMBytes || args[i].v_handle == NULL) {
    tvmrt_fail("ArgumentTypeError",
               "%s: argument %d must be bytes (TVMByteArray), got type code %d", fn, i, codes[i]);
    return NULL;
  }
  return (const TVMByteArray*)args[i].v_handle;
}

static int f_load_params(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  const TVMByteArray* b;
  tvmrt_params params;
  int status;
  if (tvmrt_arity("load_params", n, 1, 1) != 0) return -1;
  if ((b = arg_bytes(args, codes, 0, "load_params")) == NULL) return -1;
  if (tvmrt_params_parse((const uint8_t*)b->data, b->size, RT_PARAMS_VIEWS, &params) != 0)
    return -1;
  status = tvmrt_graph_set_params((tvmrt_module*)self, &params, 0);
  tvmrt_params_free(&params);
  return status;
}

static int f_load_params_from_file(void* self, TVMValue* args, int* codes, int n, TVMValue* ret,
                                   int* rc) {
  char* data = NULL;
  size_t size = 0;
  tvmrt_params params;
  int status;
  (void)ret, (void)rc;
  if (tvmrt_arity("load_params_from_file", n, 1, 1) != 0) return -1;
  if (codes[0] != kTVMStr) {
    return tvmrt_fail("ArgumentTypeError",
                      "load_params_from_file: the path must be a string, got type code %d",
                      codes[0]);
  }
  if (tvmrt_read_regular(args[0].v_str, "ParamsFormatError", "params file", RT_MAX_PARAMS_BYTES,
                         &tvmrt_params_file_magic, &data, &size) != 0) {
    return -1;
  }
  status = tvmrt_params_parse((const uint8_t*)data, size, RT_PARAMS_VIEWS, &params);
  if (status == 0) {
    status = tvmrt_graph_set_params((tvmrt_module*)self, &params, 0);
    tvmrt_params_free(&params);
  }
  free(data);
  return status;
}

static int f_share_params(void* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* rc) {
  graph_executor* ge = GE(self);
  tvmrt_module* other;
  graph_executor* og;
  const TVMByteArray* b;
  tvmrt_params params;
  size_t i, held = 0;
  tvmrt_object** grown;
  if (tvmrt_arity("share_params", n, 2, 2) != 0) return -1;
  if (codes[0] != kTVMModuleHandle || (other = tvmrt_module_check(args[0].v_handle)) == NULL) {
    return tvmrt_fail("ArgumentTypeError", "share_params: argument 0 must be a Module");
  }
  if (strcmp(other->type_key, "GraphExecutor") != 0) {
    return tvmrt_fail("ArgumentTypeError", "share_params needs a GraphExecutor, got '%s'",
                      other->type_key);
  }
  og = (graph_executor*)other->impl;
  if ((b = arg_bytes(args, codes, 1, "share_params")) == NULL) return -1;
  if (tvmrt_params_parse((const uint8_t*)b->data, b->size, RT_PARAMS_NAMES, &params) != 0)
    return -1;
  /* every shared param is checked before any is rebound (as the Python runtime) */
  for (i = 0; i < params.count; ++i) {
    int idx = tvmrt_ge_input_index(ge, params.names[i]),
        oidx = tvmrt_ge_input_index(og, params.names[i]);
    char label[300];
    if (idx < 0 || oidx < 0) continue;
    snprintf(label, sizeof(label), "shared param '%.200s'", params.names[i]);
    if (tvmrt_ge_external_problem(&ge->entries[tvmrt_ge_input_eid(ge, (size_t)idx)],
                                  &og->entries[tvmrt_ge_input_eid(og, (size_t)oidx)], label) != 0) {
      tvmrt_params_free(&params);
      return -1;
    }
    ++held;
  }
  grown = (tvmrt_object**)realloc(ge->shared, (ge->num_shared + held + 1) * sizeof(tvmrt_object*));
  if (grown == NULL) {
    tvmrt_params_free(&params);
    return tvmrt_fail("DeviceOutOfMemoryError", "share_params: out of memory");
  }
  ge->shared = grown;
  for (i = 0; i < params.count; ++i) {
    int idx = tvmrt_ge_input_index(ge, params.names[i]),
        oidx = tvmrt_ge_input_index(og, params.names[i]);
    uint32_t eid, oeid;
    tvmrt_object* owner;
    if (idx < 0 || oidx < 0) continue;
    eid = tvmrt_ge_input_eid(ge, (size_t)idx);
    oeid = tvmrt_ge_input_eid(og, (size_t)oidx);
    /* keep the memory itself (the other executor's pool), not the other executor: two
       executors sharing with each other, or one with itself, hold no cycle */
    owner = og->owners[oeid];
    if (owner != NULL) {
      tvmrt_retain(owner);
      ge->shared[ge->num_shared++] = owner;
    }
    tvmrt_ge_rebind(ge, eid, &og->entries[oeid], 1, owner);
    ge->is_param[idx] = 1;
    ge->read_only[idx] = og->read_only[oidx]; /* the same memory */
  }
  tvmrt_params_free(&params);
  return 0;
}

static const struct {
  const char* name;
  tvmrt_fn fn;
} k_functions[] = {
    {"set_input", f_set_input},
    {"set_input_zero_copy", f_set_input_zero_copy},
    {"set_output_zero_copy", f_set_output_zero_copy},
    {"run", f_run},
    {"run_from_inputs", f_run_from_inputs},
    {"get_output", f_get_output},
    {"get_input", f_get_input},
    {"get_num_outputs", f_get_num_outputs},
    {"get_num_inputs", f_get_num_inputs},
    {"get_input_index", f_get_input_index},
    {"get_output_index", f_get_output_index},
    {"get_input_info", f_get_input_info},
    {"get_output_info", f_get_output_info},
    {"load_params", f_load_params},
    {"load_params_from_file", f_load_params_from_file},
    {"share_params", f_share_params},
};

tvmrt_func* tvmrt_ge_lookup(tvmrt_module* mod, const char* name) {
  size_t i;
  for (i = 0; i < sizeof(k_functions) / sizeof(k_functions[0]); ++i) {
    if (strcmp(k_functions[i].name, name) == 0) {
      return tvmrt_func_new(k_functions[i].fn, mod, &mod->hdr);
    }
  }
  return NULL;
}

static void tvmrt_ge_finalize(tvmrt_module* mod) { tvmrt_ge_destroy((graph_executor*)mod->impl); }

tvmrt_module* tvmrt_ge_module(graph_executor* ge) {
  tvmrt_module* mod;
  if (ge == NULL) return NULL;
  mod = tvmrt_module_new("GraphExecutor", ge); /* the debug executor's too, as TVM's */
  if (mod == NULL) {
    tvmrt_ge_destroy(ge);
    return NULL;
  }
  mod->lookup = tvmrt_ge_lookup;
  mod->finalize = tvmrt_ge_finalize;
  return mod;
}

tvmrt_module* tvmrt_graph_executor_create(const char* json, size_t len, tvmrt_module* lib,
                                          const DLDevice* devs, size_t num_devs) {
  return tvmrt_ge_module(tvmrt_ge_create(json, len, lib, devs, num_devs));
}
