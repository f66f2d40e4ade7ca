/*
 * The bounded reader of dmlc streams (params blobs, tensor records, module blobs; reader.c):
 * every read is checked against the bytes left, and errors (tvmrt_fail, of the reader's
 * error class: ParamsFormatError unless it says) name the stream, the field and the byte
 * offset.
 */
#ifndef TVMRT_NATIVE_RUNTIME_READER_H_
#define TVMRT_NATIVE_RUNTIME_READER_H_

#include <stddef.h>
#include <stdint.h>

#include "native.h"

typedef struct {
  const uint8_t* data;
  size_t size, off;
  const char* what;  /* named in errors */
  int container;     /* the module blob it came from: RT_BLOB_* (0 for any other stream) */
  const char* error; /* the error class of a short read (NULL: ParamsFormatError) */
} tvmrt_reader;

/* module blobs: `__tvm_dev_mblob` (TVM <= 0.20), TVM 0.21's `__tvm_ffi_library_bin` (the same
   layout), `__tvm_ffi__library_bin` (TVM >= 0.22, indptr layout) */
enum { RT_BLOB_MBLOB = 0, RT_BLOB_FFI_021 = 1, RT_BLOB_FFI = 2 };

int tvmrt_read_u64(tvmrt_reader* r, uint64_t* out, const char* field);
int tvmrt_read_bytes(tvmrt_reader* r, void* out, size_t n, const char* field);
/* a length-prefixed string, malloc'd and NUL-terminated */
int tvmrt_read_str(tvmrt_reader* r, char** out, size_t* len, const char* field);
/* a count that cannot exceed what is left (each item >= min_item bytes) */
int tvmrt_read_count(tvmrt_reader* r, uint64_t* out, size_t min_item, const char* field);
/* a count, then that many u64s, into a malloc'd array (*out is NULL on an early failure;
   the caller frees it either way) */
int tvmrt_read_u64_vec(tvmrt_reader* r, uint64_t** out, uint64_t* n, const char* field);
/* report that `field` needs `need` bytes where fewer are left; returns -1 */
int tvmrt_read_short(tvmrt_reader* r, const char* field, size_t need);

#endif /* TVMRT_NATIVE_RUNTIME_READER_H_ */
