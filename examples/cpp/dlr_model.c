/*
 * A DLR program: runs a SageMaker Neo model folder through DLR's C API (dlr.h) only, as
 * written for DLR 1.10; with tvmrt it links against libdlr.so from tvmrt (-ldlr), nothing
 * else changes.
 *
 *   dlr_model MODEL_DIR OUT_DIR [DEVICE_TYPE] [NAME=FILE ...]
 *
 * Each NAME=FILE sets input NAME from FILE's raw bytes (the input's dtype, row-major); an
 * input of unknown size (a Relay VM model's -1 dimension) takes its size from the file's;
 * after the run, output i is written to OUT_DIR/output_<i>.bin, and one line per input and
 * output describes the model. DEVICE_TYPE is DLPack's (1: CPU, the default). Any failure
 * prints DLRGetLastError() and exits with 1.
 */
#include <dlr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static DLRModelHandle model = NULL;

static void check(int status, const char* what) {
  if (status != 0) {
    fprintf(stderr, "%s failed: %s\n", what, DLRGetLastError());
    DeleteDLRModel(&model);
    exit(1);
  }
}

/* the byte count of a file, or -1 */
static long file_size(const char* path) {
  FILE* f = fopen(path, "rb");
  long n = -1;
  if (f != NULL && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (f != NULL) fclose(f);
  return n;
}

/* the one -1 dimension of shape sized from `bytes`; the element count, or -1 */
static int64_t fill_shape(int64_t* shape, int dim, long bytes, size_t elem) {
  int64_t known = 1;
  int d, unknown = -1;
  for (d = 0; d < dim; ++d) {
    if (shape[d] >= 0) known *= shape[d];
    else if (unknown < 0) unknown = d;
    else return -1;
  }
  if (unknown < 0) return known;
  if (bytes < 0 || known == 0 || (size_t)bytes % (elem * (size_t)known) != 0) return -1;
  shape[unknown] = (int64_t)((size_t)bytes / (elem * (size_t)known));
  return known * shape[unknown];
}

/* bytes per element of a DLR type name ("float32", "int8", "uint16", "bool") */
static size_t type_bytes(const char* type) {
  const char* digits = type + strcspn(type, "0123456789");
  int bits = *digits ? atoi(digits) : 8;
  return (size_t)(bits + 7) / 8;
}

static void print_shape(const int64_t* shape, int dim) {
  int d;
  printf("(");
  for (d = 0; d < dim; ++d) printf(d ? ", %lld" : "%lld", (long long)shape[d]);
  printf(")");
}

static void set_input(const char* arg) {
  const char* eq = strchr(arg, '=');
  char name[256];
  int num_inputs, i;
  if (eq == NULL || (size_t)(eq - arg) >= sizeof(name)) {
    fprintf(stderr, "expected NAME=FILE, got %s\n", arg);
    exit(2);
  }
  memcpy(name, arg, (size_t)(eq - arg));
  name[eq - arg] = '\0';
  check(GetDLRNumInputs(&model, &num_inputs), "GetDLRNumInputs");
  for (i = 0; i < num_inputs; ++i) {
    const char *input_name, *type;
    int64_t size, shape[32];
    int dim;
    size_t bytes;
    void* data;
    FILE* f;
    check(GetDLRInputName(&model, i, &input_name), "GetDLRInputName");
    if (strcmp(input_name, name) != 0) continue;
    check(GetDLRInputType(&model, i, &type), "GetDLRInputType");
    check(GetDLRInputSizeDim(&model, i, &size, &dim), "GetDLRInputSizeDim");
    check(GetDLRInputShape(&model, i, shape), "GetDLRInputShape");
    if (size < 0 && (size = fill_shape(shape, dim, file_size(eq + 1), type_bytes(type))) < 0) {
      fprintf(stderr, "cannot size input %s from %s\n", name, eq + 1);
      exit(2);
    }
    bytes = (size_t)size * type_bytes(type);
    data = malloc(bytes ? bytes : 1);
    f = fopen(eq + 1, "rb");
    if (data == NULL || f == NULL || fread(data, 1, bytes, f) != bytes) {
      fprintf(stderr, "cannot read %zu bytes of input %s from %s\n", bytes, name, eq + 1);
      exit(2);
    }
    fclose(f);
    check(SetDLRInput(&model, name, shape, data, dim), "SetDLRInput");
    free(data);
    return;
  }
  fprintf(stderr, "%s is not an input of the model\n", name);
  exit(2);
}

int main(int argc, char** argv) {
  const char *version, *backend;
  int num_inputs, num_weights, num_outputs, i, dev_type = 1, first = 3;
  bool has_metadata;
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL_DIR OUT_DIR [DEVICE_TYPE] [NAME=FILE ...]\n", argv[0]);
    return 2;
  }
  if (argc > 3 && strchr(argv[3], '=') == NULL) dev_type = atoi(argv[first++]);
  check(CreateDLRModel(&model, argv[1], dev_type, 0), "CreateDLRModel");
  check(GetDLRVersion(&version), "GetDLRVersion");
  check(GetDLRBackend(&model, &backend), "GetDLRBackend");
  check(GetDLRHasMetadata(&model, &has_metadata), "GetDLRHasMetadata");
  check(GetDLRNumInputs(&model, &num_inputs), "GetDLRNumInputs");
  check(GetDLRNumWeights(&model, &num_weights), "GetDLRNumWeights");
  check(GetDLRNumOutputs(&model, &num_outputs), "GetDLRNumOutputs");
  printf("DLR %s, backend %s, metadata %s, %d inputs, %d weights, %d outputs\n", version, backend,
         has_metadata ? "yes" : "no", num_inputs, num_weights, num_outputs);
  for (i = 0; i < num_inputs; ++i) {
    const char *name, *type;
    int64_t size, shape[32];
    int dim;
    check(GetDLRInputName(&model, i, &name), "GetDLRInputName");
    check(GetDLRInputType(&model, i, &type), "GetDLRInputType");
    check(GetDLRInputSizeDim(&model, i, &size, &dim), "GetDLRInputSizeDim");
    check(GetDLRInputShape(&model, i, shape), "GetDLRInputShape");
    printf("input %d: %s %s ", i, name, type);
    print_shape(shape, dim);
    printf("\n");
  }
  for (i = first; i < argc; ++i) set_input(argv[i]);
  check(RunDLRModel(&model), "RunDLRModel");
  for (i = 0; i < num_outputs; ++i) {
    const char *type, *name = "";
    int64_t size, shape[32];
    int dim;
    char path[4096];
    void* data;
    FILE* f;
    check(GetDLROutputType(&model, i, &type), "GetDLROutputType");
    check(GetDLROutputSizeDim(&model, i, &size, &dim), "GetDLROutputSizeDim");
    check(GetDLROutputShape(&model, i, shape), "GetDLROutputShape");
    if (has_metadata) check(GetDLROutputName(&model, i, &name), "GetDLROutputName");
    data = malloc((size_t)size * type_bytes(type) + 1);
    if (data == NULL) return 2;
    check(GetDLROutput(&model, i, data), "GetDLROutput");
    snprintf(path, sizeof(path), "%s/output_%d.bin", argv[2], i);
    f = fopen(path, "wb");
    if (f == NULL ||
        fwrite(data, 1, (size_t)size * type_bytes(type), f) != (size_t)size * type_bytes(type)) {
      fprintf(stderr, "cannot write %s\n", path);
      return 2;
    }
    fclose(f);
    free(data);
    printf("output %d: %s %s ", i, name, type);
    print_shape(shape, dim);
    printf("\n");
  }
  check(DeleteDLRModel(&model), "DeleteDLRModel");
  return 0;
}
