/*
 * A tvm-ffi kernel library made by tests/native/test_c_ffi.py (built with `cc -shared`):
 * kernels in tvm-ffi's calling convention, exported as __tvm_ffi_<name>, reporting errors
 * through an import of TVMFFIErrorSetRaisedFromCStrParts, as TVM >= 0.22's code does.
 * With -DUNKNOWN_IMPORT it also imports a tvm-ffi function no tvmrt runtime provides.
 */
#include <stdint.h>

typedef struct {
  int32_t type_index;
  uint32_t zero_padding;
  union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
  } v;
} TVMFFIAny;

typedef struct {
  void* data;
  int32_t device_type, device_id;
  int32_t ndim;
  uint8_t code, bits;
  uint16_t lanes;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} Tensor; /* DLTensor's layout */

void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** parts, int32_t num_parts);
#ifdef UNKNOWN_IMPORT
void TVMFFIObjectIncRef(void* obj);
#endif

static int fail(const char* what) {
  const char* parts[2] = {"scale: ", what};
  TVMFFIErrorSetRaisedFromCStrParts("ValueError", parts, 2);
  return -1;
}

/* scale(x: float32 tensor, out: float32 tensor, factor: int) -> the element count */
int __tvm_ffi_scale(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  const Tensor *x, *out;
  int64_t n = 1, i;
  (void)self;
#ifdef UNKNOWN_IMPORT
  TVMFFIObjectIncRef(self);
#endif
  if (num_args != 3) return fail("expected 3 arguments");
  if (args[0].type_index != 7 || args[1].type_index != 7 || args[2].type_index != 1) {
    return fail("expected (tensor, tensor, int)");
  }
  x = (const Tensor*)args[0].v.v_ptr;
  out = (const Tensor*)args[1].v.v_ptr;
  if (x->byte_offset != 0 || out->byte_offset != 0) return fail("a byte offset was not folded");
  if (x->code != 2 || x->bits != 32 || out->code != 2 || out->bits != 32) {
    return fail("expected float32 tensors");
  }
  for (i = 0; i < x->ndim; ++i) n *= x->shape[i];
  for (i = 0; i < n; ++i) {
    ((float*)out->data)[i] = ((const float*)x->data)[i] * (float)args[2].v.v_int64;
  }
  result->type_index = 1;
  result->v.v_int64 = n;
  return 0;
}

/* dtype_of(t) -> code * 65536 + bits * 256 + lanes of the tensor the kernel sees */
int __tvm_ffi_dtype_of(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  const Tensor* t;
  (void)self;
  if (num_args != 1 || args[0].type_index != 7) return fail("expected one tensor");
  t = (const Tensor*)args[0].v.v_ptr;
  result->type_index = 1;
  result->v.v_int64 = (int64_t)t->code * 65536 + t->bits * 256 + t->lanes;
  return 0;
}
