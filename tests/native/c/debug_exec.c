/*
 * The debug executor from C (graph_debug.c), as a C program of TVM's would use it:
 *
 *   debug_exec LIB INPUT OUT
 *
 * loads the factory library LIB, makes `debug_create("default", cpu)`, copies the bytes of
 * INPUT into input "x", times every node (run_individual: TVM's bytes), then runs the graph
 * node by node (execute_node, get_node_output) and writes each node's first output, then
 * debug_get_output of the last node, to OUT. It prints the node count, then the words of a
 * misused call (a node past the end), then "profiled N": the calls of profile_nodes (each an
 * op node, in order, its stop at or after its start), and "ok".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_io.h"

static int g_failed = 0;

static size_t nbytes(const DLTensor* t) {
  size_t n = (size_t)(t->dtype.bits * t->dtype.lanes + 7) / 8;
  int i;
  for (i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  return n;
}

static void write_array(FILE* out, DLTensor* t) {
  size_t n = nbytes(t);
  char* buf = (char*)malloc(n ? n : 1);
  if (buf == NULL) exit(1);
  CHECK(TVMArrayCopyToBytes(t, buf, n));
  if (fwrite(buf, 1, n, out) != n) exit(1);
  free(buf);
}

int main(int argc, char** argv) {
  TVMModuleHandle lib, gmod;
  TVMFunctionHandle f;
  TVMValue args[6], ret;
  int codes[6], code, i;
  int64_t count, nid;
  const TVMByteArray* blob;
  DLTensor* x;
  FILE* out;
  char* input;
  size_t in_size;
  if (argc != 4) return 2;
  input = read_file(argv[2], &in_size);
  CHECK(TVMModLoadFromFile(argv[1], "so", &lib));

  args[0].v_str = "default";
  codes[0] = kTVMStr;
  args[1].v_int64 = kDLCPU;
  args[2].v_int64 = 0;
  codes[1] = codes[2] = kTVMArgInt;
  call_named(lib, "debug_create", args, codes, 3, &ret, &code);
  EXPECT(code == kTVMModuleHandle);
  gmod = ret.v_handle;

  args[0].v_str = "x";
  codes[0] = kTVMStr;
  call_named(gmod, "get_input", args, codes, 1, &ret, &code);
  x = (DLTensor*)ret.v_handle;
  EXPECT(nbytes(x) == in_size);
  CHECK(TVMArrayCopyFromBytes(x, input, in_size));
  CHECK(TVMArrayFree(x));
  free(input);

  /* run_individual(2, 2, 0, 100, 0, 1): an int64 count, then 2 doubles per node */
  f = get(gmod, "run_individual");
  for (i = 0; i < 6; ++i) codes[i] = kTVMArgInt;
  args[0].v_int64 = 2;
  args[1].v_int64 = 2;
  args[2].v_int64 = 0;
  args[3].v_int64 = 100;
  args[4].v_int64 = 0;
  args[5].v_int64 = 1;
  CHECK(TVMFuncCall(f, args, codes, 6, &ret, &code));
  EXPECT(code == kTVMBytes);
  blob = (const TVMByteArray*)ret.v_handle; /* valid until the next run_individual* */
  memcpy(&count, blob->data, sizeof(count));
  EXPECT(blob->size == sizeof(int64_t) + (size_t)count * 2 * sizeof(double));
  for (i = 0; i < count * 2; ++i) {
    double t;
    memcpy(&t, blob->data + sizeof(int64_t) + (size_t)i * sizeof(double), sizeof(t));
    EXPECT(t >= 0 && t < 1.0);
  }
  CHECK(TVMFuncFree(f));
  printf("nodes %lld\n", (long long)count);

  if ((out = fopen(argv[3], "wb")) == NULL) return 2;
  for (nid = 0; nid < count; ++nid) {
    args[0].v_int64 = nid;
    args[1].v_int64 = 0;
    codes[0] = codes[1] = kTVMArgInt;
    call_named(gmod, "execute_node", args, codes, 1, &ret, &code);
    call_named(gmod, "get_node_output", args, codes, 2, &ret, &code);
    EXPECT(code == kTVMNDArrayHandle);
    write_array(out, (DLTensor*)ret.v_handle);
    CHECK(TVMArrayFree((DLTensor*)ret.v_handle));
  }
  args[0].v_int64 = count - 1;
  call_named(gmod, "debug_get_output", args, codes, 1, &ret, &code);
  write_array(out, (DLTensor*)ret.v_handle);
  CHECK(TVMArrayFree((DLTensor*)ret.v_handle));
  fclose(out);

  f = get(gmod, "execute_node");
  args[0].v_int64 = count;
  EXPECT(TVMFuncCall(f, args, codes, 1, &ret, &code) != 0);
  printf("%s\n", TVMGetLastError());
  CHECK(TVMFuncFree(f));

  /* profile_nodes(): an int64 count, then (node, start ns, stop ns) per call */
  call_named(gmod, "profile_nodes", args, codes, 0, &ret, &code);
  EXPECT(code == kTVMBytes);
  blob = (const TVMByteArray*)ret.v_handle;
  memcpy(&count, blob->data, sizeof(count));
  EXPECT(blob->size == sizeof(int64_t) + (size_t)count * 3 * sizeof(int64_t));
  for (i = 0, nid = -1; i < count; ++i) {
    int64_t row[3];
    memcpy(row, blob->data + sizeof(int64_t) + (size_t)i * sizeof(row), sizeof(row));
    EXPECT(row[0] > nid && (uint64_t)row[2] >= (uint64_t)row[1] && row[1] != 0);
    nid = row[0];
  }
  printf("profiled %lld\n", (long long)count);

  CHECK(TVMModFree(gmod));
  CHECK(TVMModFree(lib));
  printf("ok\n");
  return g_failed;
}
