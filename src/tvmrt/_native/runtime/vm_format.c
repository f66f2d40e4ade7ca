/*
 * code.ro, the serialized Relay VM executable of TVM 0.14-0.19 (Executable::Save/Load in
 * TVM's src/runtime/vm/executable.cc), read with the bounded reader: every count is checked
 * against the bytes left before anything is allocated for it, every instruction's hash is
 * recomputed and its field count checked against its opcode. What the operands point at is
 * checked by vm_decode.c. Errors are ModuleLoadErrors naming the field and byte offset.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm.h"

const char* const tvmrt_vm_opcode_names[VM_NUM_OPCODES] = {
    "Move",           "Ret",        "Invoke",       "InvokeClosure", "InvokePacked", "AllocTensor",
    "AllocTensorReg", "AllocADT",   "AllocClosure", "GetField",      "If",           "LoadConst",
    "Goto",           "GetTag",     "LoadConsti",   "Fatal",         "AllocStorage", "ShapeOf",
    "ReshapeTensor",  "DeviceCopy", "KillRegister"};

/* fixed field counts, -1 where a count field decides */
static const int k_fixed[VM_NUM_OPCODES] = {2, 1, -1, -1, -1, -1, 7, -1, -1, 3, 4,
                                            3, 1, 2,  2,  0,  -1, 2, 3,  4,  1};

static int64_t expected_fields(int op, const int64_t* f, size_t n) {
  size_t at = 1, base = 3;
  if (k_fixed[op] >= 0) return k_fixed[op];
  if (op == VM_ALLOC_TENSOR) at = 5, base = 7;
  if (op == VM_ALLOC_STORAGE) at = 6, base = 8;
  if (n <= at || f[at] < 0 || f[at] > (int64_t)n) return -1;
  return (int64_t)base + f[at];
}

static uint64_t instruction_hash(int64_t op, const int64_t* f, size_t n) {
  uint64_t key = (uint64_t)op;
  size_t i;
  for (i = 0; i < n; ++i) key ^= (uint64_t)f[i] + 0x9E3779B9ULL + (key << 6) + (key >> 2);
  return key;
}

static int fail_at(tvmrt_reader* r, size_t at, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_at(tvmrt_reader* r, size_t at, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return tvmrt_fail("ModuleLoadError", "%s: %s (at byte offset %zu)", r->what, msg, at);
}

static int read_i32(tvmrt_reader* r, int32_t* out, const char* field) {
  uint8_t b[4];
  if (tvmrt_read_bytes(r, b, 4, field) != 0) return -1;
  *out =
      (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
  return 0;
}

static int read_strs(tvmrt_reader* r, char*** out, size_t* n, const char* field) {
  uint64_t count, i;
  *out = NULL;
  *n = 0;
  if (tvmrt_read_count(r, &count, 8, field) != 0) return -1;
  *out = (char**)calloc((size_t)count + 1, sizeof(char*));
  if (*out == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %s", field);
  for (i = 0; i < count; ++i) {
    if (tvmrt_read_str(r, &(*out)[i], NULL, field) != 0) return -1;
    *n = (size_t)i + 1;
  }
  return 0;
}

static void free_strs(char** s, size_t n) {
  size_t i;
  if (s == NULL) return;
  for (i = 0; i < n; ++i) free(s[i]);
  free(s);
}

static int read_i64s(tvmrt_reader* r, int64_t** out, size_t* n, const char* field) {
  uint64_t count, i;
  *out = NULL;
  if (tvmrt_read_count(r, &count, 8, field) != 0) return -1;
  *out = (int64_t*)malloc((size_t)(count ? count : 1) * sizeof(int64_t));
  if (*out == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %s", field);
  for (i = 0; i < count; ++i) {
    if (tvmrt_read_u64(r, (uint64_t*)&(*out)[i], field) != 0) return -1;
  }
  *n = (size_t)count;
  return 0;
}

/* TVM 0.14-0.19 ("0.16.dev0", "0.19.0", ...) */
static int check_version(const char* v, const char* what) {
  char* end = NULL;
  long minor = -1;
  if (strncmp(v, "0.", 2) == 0 && v[2] >= '0' && v[2] <= '9') minor = strtol(v + 2, &end, 10);
  if (end == NULL || (*end != '\0' && *end != '.' && *end != '+' && *end != '-') || minor < 14 ||
      minor > 19) {
    return tvmrt_fail("ModuleLoadError",
                      "%s: the executable was written by TVM '%.64s'; tvmrt reads the Relay VM "
                      "layout of TVM 0.14 to 0.19 (older versions lay out devices, LoadConst and "
                      "AllocStorage differently; TVM 0.20 and later have no Relay VM)",
                      what, v);
  }
  return 0;
}

static int read_constants(tvmrt_reader* r, vm_exe* exe) {
  uint64_t n, k;
  size_t ndev = 0, at;
  if (tvmrt_read_count(r, &n, 4, "number of constants") != 0) return -1;
  exe->consts = (tvmrt_ndarray**)calloc((size_t)n + 1, sizeof(tvmrt_ndarray*));
  exe->const_names = (char**)calloc((size_t)n + 1, sizeof(char*));
  if (exe->consts == NULL || exe->const_names == NULL) {
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the constant pool");
  }
  exe->num_consts = (size_t)n;
  for (k = 0; k < n; ++k) {
    int32_t tag;
    at = r->off;
    if (read_i32(r, &tag, "constant tag") != 0) return -1;
    if (tag == 0) {
      if (tvmrt_read_tensor(r, &exe->consts[k]) != 0) return -1;
    } else if (tag == 1) {
      if (tvmrt_read_str(r, &exe->const_names[k], NULL, "late-bound constant name") != 0) {
        return -1;
      }
    } else {
      return fail_at(r, at, "constant %lld has tag %d, expected 0 (immediate) or 1 (late-bound)",
                     (long long)k, tag);
    }
  }
  at = r->off;
  if (read_i64s(r, &exe->const_devs, &ndev, "constant device indexes") != 0) return -1;
  if (ndev != exe->num_consts) {
    return fail_at(r, at, "%lld constant device indexes for %lld constants", (long long)ndev,
                   (long long)n);
  }
  return 0;
}

static int read_attrs(tvmrt_reader* r) { /* primitive attributes: read and checked, unused */
  uint64_t n, i, m, j, index;
  if (tvmrt_read_count(r, &n, 16, "number of primitive attribute maps") != 0) return -1;
  for (i = 0; i < n; ++i) {
    if (tvmrt_read_u64(r, &index, "primitive index") != 0 ||
        tvmrt_read_count(r, &m, 16, "number of attributes") != 0) {
      return -1;
    }
    for (j = 0; j < 2 * m; ++j) {
      char* s = NULL;
      if (tvmrt_read_str(r, &s, NULL, j % 2 ? "attribute value" : "attribute key") != 0) return -1;
      free(s);
    }
  }
  return 0;
}

static int parse_decimal(tvmrt_reader* r, size_t at, const char* s, int64_t* out) {
  size_t i, n = strlen(s);
  if (n == 0 || n > 12) return fail_at(r, at, "function header count '%.32s' is not a decimal", s);
  for (i = 0; i < n; ++i) {
    if (s[i] < '0' || s[i] > '9') {
      return fail_at(r, at, "function header count '%.32s' is not a decimal", s);
    }
  }
  *out = strtoll(s, NULL, 10);
  return 0;
}

static int read_instruction(tvmrt_reader* r, vm_func* fn, size_t pc, size_t* used, size_t* cap,
                            int check_hash) {
  size_t at = r->off, n = 0;
  int64_t* w = NULL;
  int64_t want;
  char where[160];
  snprintf(where, sizeof(where), "instruction %zu of function '%.100s'", pc, fn->name);
  if (read_i64s(r, &w, &n, where) != 0) goto fail;
  if (n < 2) {
    fail_at(r, at, "%s has %lld words, expected >= 2", where, (long long)n);
    goto fail;
  }
  if (w[1] < 0 || w[1] >= VM_NUM_OPCODES) {
    fail_at(r, at, "%s has opcode %lld, expected 0 to 20", where, (long long)w[1]);
    goto fail;
  }
  want = expected_fields((int)w[1], w + 2, n - 2);
  if (want != (int64_t)(n - 2)) {
    fail_at(r, at, "%s has %lld fields, expected %lld", where, (long long)(n - 2), (long long)want);
    goto fail;
  }
  if (check_hash && instruction_hash(w[1], w + 2, n - 2) != (uint64_t)w[0]) {
    fail_at(r, at, "%s (%s): hash mismatch", where, tvmrt_vm_opcode_names[w[1]]);
    goto fail;
  }
  if (*used + n - 1 > *cap) {
    size_t c = (*cap + n) * 2;
    int64_t* grown = (int64_t*)realloc(fn->words, c * sizeof(int64_t));
    if (grown == NULL) {
      tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the code of '%.100s'", fn->name);
      goto fail;
    }
    fn->words = grown;
    *cap = c;
  }
  memcpy(fn->words + *used, w + 1, (n - 1) * sizeof(int64_t));
  fn->starts[pc] = *used;
  fn->lengths[pc] = n - 2;
  *used += n - 1;
  free(w);
  return 0;
fail:
  free(w);
  return -1;
}

static int read_function(tvmrt_reader* r, vm_exe* exe, char** globals, int check_hash) {
  size_t at = r->off, nhead = 0, ndev = 0, pc, used = 0, cap = 0;
  char** head = NULL;
  int64_t size, num;
  int index, rc = -1;
  vm_func* fn;
  if (read_strs(r, &head, &nhead, "function header") != 0) goto done;
  if (nhead != 3) {
    fail_at(r, at, "a function header has %zu strings, expected 3", nhead);
    goto done;
  }
  if (parse_decimal(r, at, head[1], &size) != 0 || parse_decimal(r, at, head[2], &num) != 0) {
    goto done;
  }
  for (index = 0; (size_t)index < exe->num_funcs; ++index) {
    if (strcmp(globals[index], head[0]) == 0) break;
  }
  if ((size_t)index == exe->num_funcs || exe->funcs[index].name != NULL) {
    fail_at(r, at, "function '%.100s' is not a global or comes twice", head[0]);
    goto done;
  }
  if (size > VM_MAX_REGISTERS) {
    fail_at(r, at, "function '%.100s' has %lld registers, more than the limit %lld", head[0],
            (long long)size, (long long)VM_MAX_REGISTERS);
    goto done;
  }
  if (num < 1 || (uint64_t)num > (r->size - r->off) / 16) {
    fail_at(r, at, "function '%.100s' claims %lld instructions for %lld bytes", head[0],
            (long long)num, (long long)(r->size - r->off));
    goto done;
  }
  fn = &exe->funcs[index];
  fn->name = head[0];
  head[0] = NULL;
  fn->num_regs = size;
  fn->num_code = (size_t)num;
  fn->starts = (size_t*)calloc((size_t)num, sizeof(size_t));
  fn->lengths = (size_t*)calloc((size_t)num, sizeof(size_t));
  if (fn->starts == NULL || fn->lengths == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the code of '%.100s'", fn->name);
    goto done;
  }
  if (read_strs(r, &fn->params, &fn->num_params, "function parameters") != 0) goto done;
  at = r->off;
  if (read_i64s(r, &fn->param_devs, &ndev, "parameter device indexes") != 0) goto done;
  if (ndev != fn->num_params) {
    fail_at(r, at, "function '%.100s' has %lld params but %lld devices", fn->name,
            (long long)fn->num_params, (long long)ndev);
    goto done;
  }
  for (pc = 0; pc < fn->num_code; ++pc) {
    if (read_instruction(r, fn, pc, &used, &cap, check_hash) != 0) goto done;
  }
  rc = 0;
done:
  free_strs(head, nhead);
  return rc;
}

static int read_body(tvmrt_reader* r, vm_exe* exe, int check_hash) {
  uint64_t magic, n, i;
  size_t at, nglob = 0, j;
  char** globals = NULL;
  int rc = -1;
  if (tvmrt_read_u64(r, &magic, "magic") != 0) return -1;
  if (magic != VM_MAGIC) {
    return tvmrt_fail("ModuleLoadError",
                      "%s: magic is %#018llx, expected %#018llx (a Relay VM "
                      "executable)",
                      r->what, (unsigned long long)magic, VM_MAGIC);
  }
  if (tvmrt_read_str(r, &exe->version, NULL, "version") != 0) return -1;
  if (check_version(exe->version, r->what) != 0) return -1;
  if (tvmrt_read_count(r, &n, 16, "number of virtual devices") != 0) return -1;
  exe->dev_types = (int32_t*)calloc((size_t)n + 1, sizeof(int32_t));
  exe->dev_ids = (int32_t*)calloc((size_t)n + 1, sizeof(int32_t));
  exe->dev_scopes = (char**)calloc((size_t)n + 1, sizeof(char*));
  if (exe->dev_types == NULL || exe->dev_ids == NULL || exe->dev_scopes == NULL) {
    return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the virtual devices");
  }
  for (i = 0; i < n; ++i) {
    exe->num_devs = (size_t)i + 1;
    if (read_i32(r, &exe->dev_types[i], "device type") != 0 ||
        read_i32(r, &exe->dev_ids[i], "device id") != 0 ||
        tvmrt_read_str(r, &exe->dev_scopes[i], NULL, "memory scope") != 0) {
      return -1;
    }
  }
  at = r->off;
  if (read_i32(r, &exe->host, "host device index") != 0) return -1;
  if (exe->host < 0 || (size_t)exe->host >= exe->num_devs) {
    return fail_at(r, at, "host device index is %d, expected 0 to %lld", exe->host,
                   (long long)exe->num_devs - 1);
  }
  if (read_strs(r, &globals, &nglob, "global function names") != 0) goto done;
  exe->funcs = (vm_func*)calloc(nglob + 1, sizeof(vm_func));
  if (exe->funcs == NULL) {
    tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate the functions");
    goto done;
  }
  if (read_constants(r, exe) != 0) goto done;
  if (read_strs(r, &exe->prims, &exe->num_prims, "primitive names") != 0) goto done;
  if (read_attrs(r) != 0) goto done;
  at = r->off;
  if (tvmrt_read_count(r, &n, 40, "number of functions") != 0) goto done;
  if (n != nglob) {
    fail_at(r, at, "the code section holds %lld functions for %lld globals", (long long)n,
            (long long)nglob);
    goto done;
  }
  exe->num_funcs = nglob;
  for (j = 0; j < nglob; ++j) {
    size_t k;
    for (k = 0; k < j; ++k) {
      if (strcmp(globals[k], globals[j]) == 0) {
        fail_at(r, at, "the global function name '%.100s' comes twice", globals[j]);
        goto done;
      }
    }
  }
  for (j = 0; j < nglob; ++j) { /* each function fills the slot of its global's name */
    if (read_function(r, exe, globals, check_hash) != 0) goto done;
  }
  if (r->off != r->size) {
    fail_at(r, r->off, "%zu bytes are left over after the code section", r->size - r->off);
    goto done;
  }
  rc = 0;
done:
  free_strs(globals, nglob);
  return rc;
}

void tvmrt_vm_exe_free(vm_exe* exe) {
  size_t i, j;
  free(exe->version);
  free(exe->dev_types);
  free(exe->dev_ids);
  free_strs(exe->dev_scopes, exe->num_devs);
  for (i = 0; i < exe->num_funcs && exe->funcs != NULL; ++i) {
    vm_func* f = &exe->funcs[i];
    free(f->name);
    free_strs(f->params, f->num_params);
    free(f->param_devs);
    free(f->words);
    free(f->starts);
    free(f->lengths);
    for (j = 0; f->code != NULL && j < f->num_code; ++j) {
      free(f->code[j].args);
      free(f->code[j].shape);
    }
    free(f->code);
  }
  free(exe->funcs);
  for (i = 0; i < exe->num_consts; ++i) {
    if (exe->consts[i] != NULL) tvmrt_release(&exe->consts[i]->hdr);
    free(exe->const_names[i]);
  }
  free(exe->consts);
  free(exe->const_names);
  free(exe->const_devs);
  free_strs(exe->prims, exe->num_prims);
  memset(exe, 0, sizeof(*exe));
}

int tvmrt_vm_read(const uint8_t* data, size_t size, const char* what, int check_hash, vm_exe* out) {
  tvmrt_reader r = {data, size, 0, what, 0, NULL};
  memset(out, 0, sizeof(*out));
  if (read_body(&r, out, check_hash) != 0) {
    const char* kind = "";
    const char* msg = tvmrt_take_last_error(&kind);
    char copy[1024];
    snprintf(copy, sizeof(copy), "%s", msg != NULL ? msg : "unknown error");
    tvmrt_vm_exe_free(out);
    /* the reader's truncation errors are the executable's load errors here */
    return tvmrt_fail(strcmp(kind, "DeviceOutOfMemoryError") == 0 ? kind : "ModuleLoadError", "%s",
                      copy);
  }
  return 0;
}
