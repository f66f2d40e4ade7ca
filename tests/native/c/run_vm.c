/*
 * Runs a Relay VM executable through libtvmrt_runtime's C API, as TVM's C++ users do, and
 * writes each output's raw bytes and layout, for tests/native/test_c_vm.py to compare with
 * the executable's golden.npz (TVM's own outputs).
 *
 *   run_vm so FOLDER SPEC OUT_DIR     TVMModLoadFromFile(FOLDER/vm.so)
 *   run_vm ro FOLDER SPEC OUT_DIR     runtime.Load_Executable(FOLDER/code.ro, FOLDER/lib.so)
 *
 * SPEC, one item a line: `run NAME` starts a run of `main`; then one line per parameter, in
 * order: `tensor CODE BITS NDIM DIMS... FILE` (raw bytes), or `tuple N` followed by N tensor
 * lines (an ADT made with runtime.Tuple). Each run does set_input + invoke and writes
 * OUT_DIR/NAME_K.bin and NAME_K.txt ("CODE BITS NDIM DIMS...") for every tensor of the
 * result (ADT fields in order); then invoke_stateful + get_num_outputs + get_output must give
 * the same bytes. CODE_RO=NAME reads FOLDER/NAME instead of code.ro; LATE_PARAMS=PATH checks
 * that init refuses before load_late_bound_consts(PATH) and works after; BAD_INPUT=1 checks
 * that set_input refuses DLTensors without a shape or data first. With REPEAT=N in the
 * environment each run also times N invokes and prints "NAME: MEDIAN_NS ns per invoke" (the median
 * of 5 batches). With PROFILE=1 each run also records one invoke (profile_start,
 * invoke_stateful, profile_stop), checks the record's layout and prints one line per event,
 * "NAME: event KIND INDEX TEXT".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tvm/runtime/c_runtime_api.h>
#include "model_io.h"

#define MAX_PARAMS 64
#define MAX_OUTS 256

static TVMModuleHandle load_vm(const char* mode, const char* folder) {
  char path[4096];
  TVMModuleHandle exe, lib, vm;
  TVMValue args[6], ret;
  int codes[6], code;
  if (strcmp(mode, "so") == 0) {
    snprintf(path, sizeof(path), "%s/vm.so", folder);
    CHECK(TVMModLoadFromFile(path, "", &exe));
  } else {
    snprintf(path, sizeof(path), "%s/lib.so", folder);
    CHECK(TVMModLoadFromFile(path, "", &lib));
    snprintf(path, sizeof(path), "%s/%s", folder,
             getenv("CODE_RO") ? getenv("CODE_RO") : "code.ro");
    exe = load_executable(path, lib);
    CHECK(TVMModFree(lib)); /* the executable holds it */
  }
  call_named(exe, "vm_load_executable", args, codes, 0, &ret, &code);
  if (code != kTVMModuleHandle) exit(1);
  vm = ret.v_handle;
  if (getenv("LATE_PARAMS") != NULL) { /* init must refuse until the constants are loaded */
    TVMFunctionHandle init = get(vm, "init");
    args[0].v_int64 = kDLCPU;
    args[1].v_int64 = 0;
    args[2].v_int64 = 2;
    codes[0] = codes[1] = codes[2] = kDLInt;
    if (TVMFuncCall(init, args, codes, 3, &ret, &code) == 0) {
      fprintf(stderr, "init ran with late-bound constants not loaded\n");
      exit(6);
    }
    printf("before loading: %s\n", TVMGetLastError());
    CHECK(TVMFuncFree(init));
    args[0].v_str = getenv("LATE_PARAMS");
    codes[0] = kTVMStr;
    call_named(exe, "load_late_bound_consts", args, codes, 1, &ret, &code);
  }
  CHECK(TVMModFree(exe)); /* the VM holds it */
  args[0].v_int64 = kDLCPU;
  args[1].v_int64 = 0;
  args[2].v_int64 = 2; /* pooled */
  codes[0] = codes[1] = codes[2] = kDLInt;
  call_named(vm, "init", args, codes, 3, &ret, &code);
  return vm;
}

static TVMArrayHandle read_tensor(char* line) {
  int dcode, bits, ndim, i, off = 0;
  int64_t shape[32];
  char file[4096];
  size_t n;
  char* data;
  TVMArrayHandle arr;
  if (sscanf(line, "tensor %d %d %d%n", &dcode, &bits, &ndim, &off) != 3 || ndim > 32) exit(2);
  line += off;
  for (i = 0; i < ndim; ++i) {
    long long d;
    if (sscanf(line, "%lld%n", &d, &off) != 1) exit(2);
    shape[i] = d;
    line += off;
  }
  if (sscanf(line, "%4095s", file) != 1) exit(2);
  data = read_file(file, &n);
  CHECK(TVMArrayAlloc(shape, ndim, dcode, bits, 1, kDLCPU, 0, &arr));
  CHECK(TVMArrayCopyFromBytes(arr, data, n));
  free(data);
  return arr;
}

typedef struct {
  DLTensor* t[MAX_OUTS];
  int n;
} outs;

static void collect(TVMValue v, int code, outs* o, TVMFunctionHandle size_f,
                    TVMFunctionHandle field_f) {
  TVMValue args[2], ret;
  int codes[2], rc, i, n;
  if (code == kTVMNDArrayHandle) {
    if (o->n == MAX_OUTS) exit(3);
    o->t[o->n++] = (DLTensor*)v.v_handle;
    return;
  }
  if (code != kTVMObjectHandle) exit(3);
  args[0] = v;
  codes[0] = kTVMObjectHandle;
  CHECK(TVMFuncCall(size_f, args, codes, 1, &ret, &rc));
  n = (int)ret.v_int64;
  for (i = 0; i < n; ++i) {
    args[1].v_int64 = i;
    codes[1] = kDLInt;
    CHECK(TVMFuncCall(field_f, args, codes, 2, &ret, &rc));
    collect(ret, rc, o, size_f, field_f);
  }
  CHECK(TVMObjectFree(v.v_handle));
}

static size_t nbytes(const DLTensor* t) {
  size_t n = (size_t)(t->dtype.bits + 7) / 8 * t->dtype.lanes;
  int i;
  for (i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  return n;
}

static void write_out(const char* dir, const char* run, int k, const DLTensor* t) {
  char path[4096];
  FILE* f;
  int i;
  snprintf(path, sizeof(path), "%s/%s_%d.bin", dir, run, k);
  f = fopen(path, "wb");
  if (f == NULL) exit(4);
  fwrite((const char*)t->data + t->byte_offset, 1, nbytes(t), f);
  fclose(f);
  snprintf(path, sizeof(path), "%s/%s_%d.txt", dir, run, k);
  f = fopen(path, "w");
  if (f == NULL) exit(4);
  fprintf(f, "%d %d %d", t->dtype.code, t->dtype.bits, t->ndim);
  for (i = 0; i < t->ndim; ++i) fprintf(f, " %lld", (long long)t->shape[i]);
  fprintf(f, "\n");
  fclose(f);
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static uint64_t u64_at(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  int i;
  for (i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

/* one invoke recorded by the VM's profiler: every event's text inside the record, each
   stop at or after its start */
static void print_profile(TVMModuleHandle vm, const char* name, TVMValue* args, int* codes) {
  TVMValue ret;
  int code;
  const TVMByteArray* rec;
  uint64_t count, i, text_at;
  call_named(vm, "profile_start", args, codes, 0, &ret, &code);
  call_named(vm, "invoke_stateful", args, codes, 1, &ret, &code);
  call_named(vm, "profile_stop", args, codes, 0, &ret, &code);
  rec = (const TVMByteArray*)ret.v_handle;
  if (code != kTVMBytes || rec->size < 8) exit(9);
  count = u64_at((const unsigned char*)rec->data, 8);
  text_at = 8 + count * 40;
  if (count > (rec->size - 8) / 40) exit(9);
  for (i = 0; i < count; ++i) {
    const unsigned char* e = (const unsigned char*)rec->data + 8 + i * 40;
    uint64_t t0 = u64_at(e + 16, 8), t1 = u64_at(e + 24, 8);
    uint64_t off = u64_at(e + 32, 4), len = u64_at(e + 36, 4);
    if (t1 < t0 || t0 == 0 || text_at + off + len > rec->size) {
      fprintf(stderr, "%s: event %llu is out of its record\n", name, (unsigned long long)i);
      exit(9);
    }
    printf("%s: event %u %u %.*s\n", name, (unsigned)u64_at(e, 4), (unsigned)u64_at(e + 4, 4),
           (int)len, rec->data + text_at + off);
  }
}

static void do_run(TVMModuleHandle vm, const char* name, TVMValue* in, int* in_codes, int nin,
                   const char* dir, TVMFunctionHandle size_f, TVMFunctionHandle field_f) {
  TVMValue args[MAX_PARAMS + 1], ret;
  int codes[MAX_PARAMS + 1], code, i, k;
  outs o = {{NULL}, 0};
  const char* repeat = getenv("REPEAT");
  args[0].v_str = "main";
  codes[0] = kTVMStr;
  for (i = 0; i < nin; ++i) args[i + 1] = in[i], codes[i + 1] = in_codes[i];
  call_named(vm, "set_input", args, codes, nin + 1, &ret, &code);
  call_named(vm, "invoke", args, codes, 1, &ret, &code);
  collect(ret, code, &o, size_f, field_f);
  for (k = 0; k < o.n; ++k) write_out(dir, name, k, o.t[k]);
  { /* invoke_return_to_device(main, cpu, 0, inputs...) gives the same tensors */
    TVMValue dargs[MAX_PARAMS + 3];
    int dcodes[MAX_PARAMS + 3];
    outs d = {{NULL}, 0};
    dargs[0].v_str = "main";
    dcodes[0] = kTVMStr;
    dargs[1].v_int64 = kDLCPU;
    dargs[2].v_int64 = 0;
    dcodes[1] = dcodes[2] = kDLInt;
    for (i = 0; i < nin; ++i) dargs[i + 3] = in[i], dcodes[i + 3] = in_codes[i];
    call_named(vm, "invoke_return_to_device", dargs, dcodes, nin + 3, &ret, &code);
    collect(ret, code, &d, size_f, field_f);
    for (k = 0; k < d.n; ++k) {
      if (k >= o.n || nbytes(d.t[k]) != nbytes(o.t[k]) ||
          memcmp(d.t[k]->data, o.t[k]->data, nbytes(o.t[k])) != 0) {
        fprintf(stderr, "%s: invoke_return_to_device's output %d differs\n", name, k);
        exit(5);
      }
      CHECK(TVMArrayFree((TVMArrayHandle)d.t[k]));
    }
    if (d.n != o.n) exit(5);
  }
  /* the stateful path gives the same bytes */
  call_named(vm, "invoke_stateful", args, codes, 1, &ret, &code);
  call_named(vm, "get_num_outputs", args, codes, 0, &ret, &code);
  if (ret.v_int64 != o.n && !(o.n > 1 && ret.v_int64 == 1)) {
    fprintf(stderr, "%s: get_num_outputs is %lld, invoke gave %d tensors\n", name,
            (long long)ret.v_int64, o.n);
    exit(5);
  }
  for (k = 0; k < (int)ret.v_int64 && ret.v_int64 == o.n; ++k) {
    TVMValue a, r;
    int ac = kDLInt, rc;
    a.v_int64 = k;
    call_named(vm, "get_output", &a, &ac, 1, &r, &rc);
    if (nbytes((DLTensor*)r.v_handle) != nbytes(o.t[k]) ||
        memcmp(((DLTensor*)r.v_handle)->data, o.t[k]->data, nbytes(o.t[k])) != 0) {
      fprintf(stderr, "%s: get_output(%d) differs from invoke's output\n", name, k);
      exit(5);
    }
    CHECK(TVMArrayFree((TVMArrayHandle)r.v_handle));
  }
  for (k = 0; k < o.n; ++k) CHECK(TVMArrayFree((TVMArrayHandle)o.t[k]));
  if (getenv("PROFILE") != NULL) print_profile(vm, name, args, codes);
  if (repeat != NULL && atoi(repeat) > 0) {
    int n = atoi(repeat), b;
    double per[5];
    TVMFunctionHandle invoke = get(vm, "invoke_stateful");
    for (b = 0; b < 5; ++b) {
      double t0 = now_ns();
      for (i = 0; i < n; ++i) CHECK(TVMFuncCall(invoke, args, codes, 1, &ret, &code));
      per[b] = (now_ns() - t0) / n;
    }
    qsort(per, 5, sizeof(double), cmp_double);
    printf("%s: %.0f ns per invoke\n", name, per[2]);
    CHECK(TVMFuncFree(invoke));
  }
}

int main(int argc, char** argv) {
  TVMModuleHandle vm;
  TVMFunctionHandle tuple_f, size_f, field_f;
  TVMValue in[MAX_PARAMS], ret;
  int in_codes[MAX_PARAMS], nin = 0, code, i;
  char line[8192], name[256] = "";
  size_t spec_n;
  char *spec, *cursor;
  if (argc != 5) {
    fprintf(stderr, "usage: run_vm so|ro FOLDER SPEC OUT_DIR\n");
    return 2;
  }
  {
    int num = 0, found = 0;
    const char** names = NULL;
    CHECK(TVMFuncListGlobalNames(&num, &names));
    for (i = 0; i < num; ++i) found += strcmp(names[i], "runtime.Load_Executable") == 0;
    if (found != 1) {
      fprintf(stderr, "runtime.Load_Executable is listed %d times\n", found);
      return 7;
    }
  }
  vm = load_vm(argv[1], argv[2]);
  if (getenv("BAD_INPUT") != NULL) { /* DLTensors without a shape or without data */
    DLTensor bad;
    int64_t shape[2] = {1, 16};
    TVMValue a[2];
    int c[2] = {kTVMStr, kTVMDLTensorHandle}, k;
    TVMFunctionHandle set_input = get(vm, "set_input");
    memset(&bad, 0, sizeof(bad));
    bad.device.device_type = kDLCPU;
    bad.dtype.code = kDLFloat;
    bad.dtype.bits = 32;
    bad.dtype.lanes = 1;
    bad.ndim = 2;
    a[0].v_str = "main";
    a[1].v_handle = &bad;
    for (k = 0; k < 2; ++k) {
      bad.shape = k == 0 ? NULL : shape;
      if (TVMFuncCall(set_input, a, c, 2, &ret, &code) == 0) return 8;
      printf("bad input %d: %s\n", k, TVMGetLastError());
    }
    CHECK(TVMFuncFree(set_input));
  }
  CHECK(TVMFuncGetGlobal("runtime.Tuple", &tuple_f));
  CHECK(TVMFuncGetGlobal("runtime.GetADTSize", &size_f));
  CHECK(TVMFuncGetGlobal("runtime.GetADTFields", &field_f));
  spec = read_file(argv[3], &spec_n);
  for (cursor = spec; *cursor != '\0';) {
    char* end = strchr(cursor, '\n');
    size_t len = end != NULL ? (size_t)(end - cursor) : strlen(cursor);
    if (len >= sizeof(line)) return 2;
    memcpy(line, cursor, len);
    line[len] = '\0';
    cursor += len + (end != NULL);
    if (strncmp(line, "run ", 4) == 0 || strcmp(line, "end") == 0) {
      if (name[0] != '\0') do_run(vm, name, in, in_codes, nin, argv[4], size_f, field_f);
      for (i = 0; i < nin; ++i) {
        if (in_codes[i] == kTVMNDArrayHandle) CHECK(TVMArrayFree(in[i].v_handle));
        else CHECK(TVMObjectFree(in[i].v_handle));
      }
      nin = 0;
      snprintf(name, sizeof(name), "%.200s", line + 4);
      if (strcmp(line, "end") == 0) break;
    } else if (strncmp(line, "tensor ", 7) == 0) {
      if (nin == MAX_PARAMS) return 2;
      in[nin].v_handle = read_tensor(line);
      in_codes[nin++] = kTVMNDArrayHandle;
    } else if (strncmp(line, "tuple ", 6) == 0) {
      int n = atoi(line + 6), k;
      TVMValue fields[MAX_PARAMS];
      int fcodes[MAX_PARAMS];
      if (n < 0 || n > MAX_PARAMS || nin == MAX_PARAMS) return 2;
      for (k = 0; k < n; ++k) {
        char* e = strchr(cursor, '\n');
        size_t l = e != NULL ? (size_t)(e - cursor) : strlen(cursor);
        if (l >= sizeof(line)) return 2;
        memcpy(line, cursor, l);
        line[l] = '\0';
        cursor += l + (e != NULL);
        fields[k].v_handle = read_tensor(line);
        fcodes[k] = kTVMNDArrayHandle;
      }
      CHECK(TVMFuncCall(tuple_f, fields, fcodes, n, &ret, &code));
      for (k = 0; k < n; ++k) CHECK(TVMArrayFree(fields[k].v_handle));
      in[nin] = ret;
      in_codes[nin++] = code;
    }
  }
  free(spec);
  CHECK(TVMFuncFree(tuple_f));
  CHECK(TVMFuncFree(size_f));
  CHECK(TVMFuncFree(field_f));
  CHECK(TVMModFree(vm));
  printf("ok\n");
  return 0;
}
