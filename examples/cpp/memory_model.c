/*
 * A model kept encrypted on disk, decrypted into memory and run from there: the kernel
 * library through TVMModLoadFromMemory (tvmrt's; it goes through a memfd, so no plaintext
 * file is written anywhere), the graph JSON and params from the same buffer.
 *
 *   memory_model MODEL.sealed KEY INPUT_NAME INPUT.bin OUTPUT.bin
 *
 * MODEL.sealed is what `python seal_model.py LIB GRAPH.json PARAMS KEY MODEL.sealed` writes:
 * "TVMRTSEAL1", then the library, the graph JSON and the params, each as a little-endian
 * u64 length and its bytes, all of it after the magic XOR-ed with KEY repeated. That cipher
 * is a stand-in that keeps the example free of dependencies and protects nothing: put your
 * real one (AES-GCM from OpenSSL or libsodium, a key from your key store) in `decrypt`.
 * `make memory_model` builds it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((call) != 0) {                                                                             \
      fprintf(stderr, "%s failed: %s\n", #call, TVMGetLastError());                                \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static const char kMagic[] = "TVMRTSEAL1";

static unsigned char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  unsigned char* buf = NULL;
  long n;
  if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
      fseek(f, 0, SEEK_SET) == 0) {
    buf = (unsigned char*)malloc((size_t)n + 1);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
      buf[n] = '\0';
      *size = (size_t)n;
    } else {
      free(buf);
      buf = NULL;
    }
  }
  if (f != NULL) fclose(f);
  if (buf == NULL) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  return buf;
}

/* your cipher goes here: this XOR with a repeating key only shows where */
static void decrypt(unsigned char* data, size_t size, const char* key) {
  size_t i, k = strlen(key);
  for (i = 0; i < size; ++i) data[i] ^= (unsigned char)key[i % k];
}

/* the next part of the opened bundle: its bytes, or exit naming what is wrong */
static unsigned char* part(unsigned char** at, const unsigned char* end, size_t* size,
                           const char* what) {
  uint64_t n = 0;
  int i;
  if ((size_t)(end - *at) < 8) {
    fprintf(stderr, "the bundle ends before the %s's length\n", what);
    exit(1);
  }
  for (i = 7; i >= 0; --i) n = (n << 8) | (*at)[i];
  *at += 8;
  if (n > (uint64_t)(end - *at)) {
    fprintf(stderr, "the bundle's %s says %llu bytes, %zu are left\n", what, (unsigned long long)n,
            (size_t)(end - *at));
    exit(1);
  }
  *size = (size_t)n;
  *at += n;
  return *at - n;
}

static size_t nbytes(const DLTensor* t) {
  size_t n = (size_t)(t->dtype.bits * t->dtype.lanes + 7) / 8;
  int i;
  for (i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  return n;
}

/* module[name](args...) */
static void call(TVMModuleHandle mod, const char* name, TVMValue* args, int* codes, int n,
                 TVMValue* ret, int* ret_code) {
  TVMFunctionHandle f;
  CHECK(TVMModGetFunction(mod, name, 0, &f));
  if (f == NULL) {
    fprintf(stderr, "the module has no function %s\n", name);
    exit(1);
  }
  CHECK(TVMFuncCall(f, args, codes, n, ret, ret_code));
  CHECK(TVMFuncFree(f));
}

int main(int argc, char** argv) {
  TVMModuleHandle lib, gmod;
  TVMFunctionHandle create;
  TVMValue args[4], ret;
  int codes[4], code, i;
  size_t sealed_size, lib_size, json_size, params_size, input_size;
  unsigned char *sealed, *at, *lib_bytes, *json_bytes, *params_bytes, *input;
  char* json;
  TVMByteArray params;
  DLTensor *in, *out;
  FILE* f;
  if (argc != 6) {
    fprintf(stderr, "usage: %s MODEL.sealed KEY INPUT_NAME INPUT.bin OUTPUT.bin\n", argv[0]);
    return 2;
  }
  sealed = read_file(argv[1], &sealed_size);
  if (sealed_size < sizeof(kMagic) - 1 || memcmp(sealed, kMagic, sizeof(kMagic) - 1) != 0) {
    fprintf(stderr, "%s is not a sealed model (no %s magic)\n", argv[1], kMagic);
    return 1;
  }
  at = sealed + sizeof(kMagic) - 1;
  decrypt(at, sealed_size - (size_t)(at - sealed), argv[2]); /* in memory only */
  lib_bytes = part(&at, sealed + sealed_size, &lib_size, "library");
  json_bytes = part(&at, sealed + sealed_size, &json_size, "graph JSON");
  params_bytes = part(&at, sealed + sealed_size, &params_size, "params");
  json = (char*)malloc(json_size + 1); /* graph_executor.create takes a C string */
  if (json == NULL) return 1;
  memcpy(json, json_bytes, json_size);
  json[json_size] = '\0';
  input = read_file(argv[4], &input_size);

  /* tvm.graph_executor.create(graph_json, lib, device_type, device_id) */
  CHECK(TVMModLoadFromMemory(lib_bytes, lib_size, "so", &lib));
  CHECK(TVMFuncGetGlobal("tvm.graph_executor.create", &create));
  args[0].v_str = json;
  args[1].v_handle = lib;
  args[2].v_int64 = kDLCPU;
  args[3].v_int64 = 0;
  codes[0] = kTVMStr;
  codes[1] = kTVMModuleHandle;
  codes[2] = codes[3] = kDLInt;
  CHECK(TVMFuncCall(create, args, codes, 4, &ret, &code));
  gmod = ret.v_handle;
  CHECK(TVMFuncFree(create));
  CHECK(TVMModFree(lib)); /* the executor keeps its kernels */

  params.data = (const char*)params_bytes;
  params.size = params_size;
  args[0].v_handle = &params;
  codes[0] = kTVMBytes;
  call(gmod, "load_params", args, codes, 1, &ret, &code);
  memset(sealed, 0, sealed_size); /* the plaintext is no longer needed: wipe it */
  memset(json, 0, json_size);
  free(sealed);
  free(json);

  args[0].v_str = argv[3];
  codes[0] = kTVMStr;
  call(gmod, "get_input", args, codes, 1, &ret, &code);
  in = (DLTensor*)ret.v_handle;
  if (in == NULL || nbytes(in) != input_size) {
    fprintf(stderr, "%s: expected %zu bytes for input %s\n", argv[4], in ? nbytes(in) : 0, argv[3]);
    return 1;
  }
  CHECK(TVMArrayCopyFromBytes(in, input, input_size));
  CHECK(TVMArrayFree(in));
  call(gmod, "run", NULL, NULL, 0, &ret, &code);

  args[0].v_int64 = 0;
  codes[0] = kDLInt;
  call(gmod, "get_output", args, codes, 1, &ret, &code);
  out = (DLTensor*)ret.v_handle;
  f = fopen(argv[5], "wb");
  if (f == NULL || fwrite((char*)out->data + out->byte_offset, 1, nbytes(out), f) != nbytes(out))
    return 1;
  fclose(f);
  printf("output 0: shape (");
  for (i = 0; i < out->ndim; ++i) printf("%s%lld", i ? ", " : "", (long long)out->shape[i]);
  printf("), %zu bytes written to %s\n", nbytes(out), argv[5]);
  CHECK(TVMArrayFree(out));
  CHECK(TVMModFree(gmod));
  free(input);
  return 0;
}
