/*
 * The kernel table of a device module (TVM's FunctionInfo map as CUDAModule and
 * OpenCLModule save it): per kernel its name, the argument dtypes (packed as TVM's
 * PackFuncVoidAddr: int32, uint32 and float32 narrowed, 64-bit values and handles as they
 * are) and the launch-param tags (blockIdx.* grid extents, threadIdx.* block extents, the
 * last one the dynamic shared memory when tagged); TVM >= 0.21 adds arg_extra_tags per
 * entry, read when the bytes hold that layout. And a call's arguments: the kernel's, then
 * one integer per launch tag (a value <= 0 leaves 1, a repeated tag's last value wins).
 * One copy for every device module of the C runtime.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* the work-size slot of a tag: 0-5, -1 the dynamic shared memory, -2 a launch flag, -3 bad */
static int tag_slot(const char* tag) {
  const char* dot = strchr(tag, '.');
  if (strcmp(tag, "tir.use_dyn_shared_memory") == 0 ||
      strcmp(tag, "tirx.use_dyn_shared_memory") == 0) {
    return -1;
  }
  if (dot != NULL && (strcmp(dot, ".use_programtic_dependent_launch") == 0 ||
                      strcmp(dot, ".use_cooperative_launch") == 0)) {
    return -2;
  }
  if (dot == NULL || strlen(dot) != 2 || dot[1] < 'x' || dot[1] > 'z') return -3;
  if ((size_t)(dot - tag) == 8 && strncmp(tag, "blockIdx", 8) == 0) return dot[1] - 'x';
  if ((size_t)(dot - tag) == 9 && strncmp(tag, "threadIdx", 9) == 0) return 3 + dot[1] - 'x';
  return -3;
}

static int read_tags(tvmrt_reader* r, tvmrt_kernel_info* k) {
  uint64_t n, i;
  if (tvmrt_read_count(r, &n, 8, "launch param tags") != 0) return -1;
  for (i = 0; i < n; ++i) {
    char* tag = NULL;
    int slot;
    if (tvmrt_read_str(r, &tag, NULL, "launch param tag") != 0) return -1;
    slot = tag_slot(tag);
    if (slot >= 0 && k->num_slots == 16) {
      tvmrt_fail("ModuleLoadError",
                 "kernel '%.200s' has more than 16 launch param tags that take a value (TVM "
                 "writes at most six: blockIdx.x/y/z, threadIdx.x/y/z)",
                 k->key);
      free(tag);
      return -1;
    }
    if (slot == -3 || (slot >= -1 && k->dyn_smem) ||
        (slot == -2 && strstr(tag, "cooperative") != NULL)) {
      if (slot == -2) {
        tvmrt_fail("ModuleLoadError",
                   "kernel '%.200s' is a cooperative launch (%.100s); libtvmrt_runtime does not "
                   "launch cooperative kernels (the Python runtime does)",
                   k->key, tag);
      } else {
        tvmrt_fail("ModuleLoadError",
                   "kernel '%.200s': launch param tag '%.100s' is not blockIdx.x/y/z, "
                   "threadIdx.x/y/z or tir.use_dyn_shared_memory (the last tag)",
                   k->key, tag);
      }
      free(tag);
      return -1;
    }
    free(tag);
    if (slot == -1) k->dyn_smem = 1;
    if (slot >= 0) k->slots[k->num_slots++] = slot;
  }
  return 0;
}

static int read_kernel(tvmrt_reader* r, tvmrt_kernel_info* k, const char* device, int extra_tags) {
  uint64_t n, i;
  char* name = NULL;
  if (tvmrt_read_str(r, &k->key, NULL, "kernel name") != 0 ||
      tvmrt_read_str(r, &name, NULL, "FunctionInfo name") != 0 ||
      tvmrt_read_count(r, &n, 4, "number of argument types") != 0) {
    free(name);
    return -1;
  }
  free(name);
  if (n > TVMRT_MAX_KERNEL_ARGS) {
    return tvmrt_fail("ModuleLoadError", "kernel '%.200s' has %llu arguments (at most %d)", k->key,
                      (unsigned long long)n, TVMRT_MAX_KERNEL_ARGS);
  }
  k->num_args = (int)n;
  k->kinds = (unsigned char*)calloc(n ? n : 1, 1);
  if (k->kinds == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot read a kernel table");
  for (i = 0; i < n; ++i) {
    uint8_t t[4];
    int kind;
    if (tvmrt_read_bytes(r, t, 4, "argument type") != 0) return -1;
    kind = tvmrt_cuda_arg_kind(t[0], t[1], t[2] | t[3] << 8);
    if (kind < 0) {
      return tvmrt_fail("ModuleLoadError",
                        "%s kernel '%.200s': cannot handle argument %llu of type (code %u, bits "
                        "%u, lanes %u) as a device function argument (TVM passes only 32/64-bit "
                        "ints, floats and handles)",
                        device, k->key, (unsigned long long)i, t[0], t[1],
                        (unsigned)(t[2] | t[3] << 8));
    }
    k->kinds[i] = (unsigned char)kind;
  }
  if (read_tags(r, k) != 0) return -1;
  if (extra_tags) {
    uint64_t m;
    if (tvmrt_read_count(r, &m, 4, "number of argument extra tags") != 0) return -1;
    if (m != n) {
      return tvmrt_fail("ModuleLoadError", "kernel '%.200s' has %llu arguments but %llu extra tags",
                        k->key, (unsigned long long)n, (unsigned long long)m);
    }
    for (i = 0; i < m; ++i) {
      int32_t tag;
      if (tvmrt_read_bytes(r, &tag, 4, "argument extra tag") != 0) return -1;
      if (tag == 1) {
        return tvmrt_fail("ModuleLoadError",
                          "kernel '%.200s' takes a TMA tensor map argument (arg_extra_tags = 1, "
                          "TVM >= 0.21); tvmrt does not pass tensor maps",
                          k->key);
      }
      if (tag != 0) {
        return tvmrt_fail("ModuleLoadError", "kernel '%.200s': unknown argument extra tag %d",
                          k->key, (int)tag);
      }
    }
  }
  return 0;
}

void tvmrt_kernel_table_free(tvmrt_kernel_table* t) {
  size_t i;
  for (i = 0; i < t->count; ++i) {
    free(t->kernels[i].key);
    free(t->kernels[i].kinds);
  }
  free(t->kernels);
  t->kernels = NULL;
  t->count = 0;
}

ptrdiff_t tvmrt_kernel_table_find(const tvmrt_kernel_table* t, const char* name) {
  size_t i;
  for (i = 0; i < t->count; ++i) {
    if (strcmp(t->kernels[i].key, name) == 0) return (ptrdiff_t)i;
  }
  return -1;
}

static int read_table(tvmrt_reader* r, tvmrt_kernel_table* m, const char* device, int extra_tags) {
  uint64_t n, i;
  if (tvmrt_read_count(r, &n, 32, "number of kernels") != 0) return -1;
  m->kernels = (tvmrt_kernel_info*)calloc(n ? n : 1, sizeof(tvmrt_kernel_info));
  if (m->kernels == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot read kernels");
  m->count = (size_t)n;
  for (i = 0; i < n; ++i) {
    if (read_kernel(r, &m->kernels[i], device, extra_tags) != 0) return -1;
  }
  return 0;
}

/* The kernel table in TVM >= 0.21's layout if the bytes hold it, else the older one. When
   neither reads, the error is the one of the layout that read further (the other misread a
   field as a length), a short read named as the module's: "<what>: kernel table: ..." */
int tvmrt_kernel_table_read(tvmrt_reader* r, const char* device, const char* what,
                            tvmrt_kernel_table* m) {
  size_t at = r->off, reached, skip = strlen(r->what);
  const char* text;
  char first[1024];
  if (read_table(r, m, device, 1) == 0) return 0;
  reached = r->off;
  snprintf(first, sizeof(first), "%s", tvmrt_peek_last_error());
  tvmrt_kernel_table_free(m);
  r->off = at;
  tvmrt_clear_last_error();
  if (read_table(r, m, device, 0) == 0) return 0;
  if (reached <= r->off) snprintf(first, sizeof(first), "%s", tvmrt_peek_last_error());
  text = strncmp(first, "ModuleLoadError: ", 17) == 0 ? first + 17 : first;
  if (strncmp(text, r->what, skip) != 0 || strncmp(text + skip, ": ", 2) != 0) {
    return tvmrt_fail("ModuleLoadError", "%s", text); /* a kernel's own check */
  }
  return tvmrt_fail("ModuleLoadError", "%s: kernel table: %s", what, text + skip + 2);
}

int tvmrt_kernel_call_args(const tvmrt_kernel_info* k, const TVMValue* args, const int* codes,
                           int n, uint64_t* holder, unsigned size[6], unsigned* smem) {
  int i, code;
  for (i = 0; i < 6; ++i) size[i] = 1;
  *smem = 0;
  if (n != k->num_args + k->num_slots + k->dyn_smem) {
    return tvmrt_fail("KernelError",
                      "kernel '%.200s' takes %d arguments and %d launch parameters, got %d values",
                      k->key, k->num_args, k->num_slots + k->dyn_smem, n);
  }
  for (i = 0; i < k->num_args; ++i) {
    int kind = k->kinds[i];
    /* a handle given as an integer (from Python, where a data handle is an int) is the
       same address, as TVM's launchers read every handle argument's bits */
    code = kind == TVMRT_ARG_HANDLE && codes[i] == kDLInt ? kTVMOpaqueHandle : codes[i];
    if (tvmrt_cuda_pack_arg(kind, args[i], code, &holder[i]) != 0) {
      return tvmrt_fail("KernelError",
                        "kernel '%.200s': argument %d must be a %s value, got type code %d", k->key,
                        i,
                        kind == TVMRT_ARG_HANDLE                         ? "handle"
                        : kind == TVMRT_ARG_F32 || kind == TVMRT_ARG_F64 ? "float"
                                                                         : "integer",
                        codes[i]);
    }
  }
  for (i = 0; i < k->num_slots + k->dyn_smem; ++i) {
    int64_t v = args[k->num_args + i].v_int64;
    code = codes[k->num_args + i];
    if (code != kDLInt && code != kDLUInt) {
      return tvmrt_fail("KernelError", "kernel '%.200s': launch parameter %d must be an integer",
                        k->key, i);
    }
    if (i < k->num_slots) {
      if (v > 0) size[k->slots[i]] = v > 0x7fffffff ? 0x7fffffffu : (unsigned)v;
    } else {
      *smem = v > 0 && v < 0x7fffffff ? (unsigned)v : 0;
    }
  }
  return 0;
}
