/*
 * The bounded reader of dmlc streams (params blobs, tensor records, module blobs): no read
 * goes past the given size, and a count is checked against the bytes left before anything
 * is allocated for it. Errors name the stream, the field and the byte offset.
 */
#include <stdlib.h>
#include <string.h>

#include "reader.h"

static const char* error_class(const tvmrt_reader* r) {
  return r->error != NULL ? r->error : "ParamsFormatError";
}

int tvmrt_read_short(tvmrt_reader* r, const char* field, size_t need) {
  return tvmrt_fail(error_class(r),
                    "%s: truncated: %s needs %zu bytes but only %zu remain at byte offset %zu",
                    r->what, field, need, r->size - r->off, r->off);
}

int tvmrt_read_bytes(tvmrt_reader* r, void* out, size_t n, const char* field) {
  if (n > r->size - r->off) return tvmrt_read_short(r, field, n);
  memcpy(out, r->data + r->off, n);
  r->off += n;
  return 0;
}

int tvmrt_read_u64(tvmrt_reader* r, uint64_t* out, const char* field) {
  uint8_t b[8];
  int i;
  if (tvmrt_read_bytes(r, b, 8, field) != 0) return -1;
  *out = 0;
  for (i = 7; i >= 0; --i) *out = (*out << 8) | b[i]; /* little-endian */
  return 0;
}

int tvmrt_read_count(tvmrt_reader* r, uint64_t* out, size_t min_item, const char* field) {
  if (tvmrt_read_u64(r, out, field) != 0) return -1;
  if (min_item > 0 && *out > (r->size - r->off) / min_item) {
    return tvmrt_fail(error_class(r),
                      "%s: %s is %llu, more than the %zu bytes left can hold at byte offset %zu",
                      r->what, field, (unsigned long long)*out, r->size - r->off, r->off - 8);
  }
  return 0;
}

int tvmrt_read_str(tvmrt_reader* r, char** out, size_t* len, const char* field) {
  uint64_t n;
  char* s;
  *out = NULL;
  if (tvmrt_read_u64(r, &n, field) != 0) return -1;
  if (n > r->size - r->off)
    return tvmrt_read_short(r, field, (size_t)(n > SIZE_MAX ? SIZE_MAX : n));
  s = (char*)malloc((size_t)n + 1);
  if (s == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %s", field);
  memcpy(s, r->data + r->off, (size_t)n);
  s[n] = '\0';
  r->off += (size_t)n;
  *out = s;
  if (len != NULL) *len = (size_t)n;
  return 0;
}

int tvmrt_read_u64_vec(tvmrt_reader* r, uint64_t** out, uint64_t* n, const char* field) {
  uint64_t i;
  *out = NULL;
  if (tvmrt_read_count(r, n, 8, field) != 0) return -1;
  *out = (uint64_t*)malloc((size_t)(*n ? *n : 1) * sizeof(uint64_t));
  if (*out == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate %s", field);
  for (i = 0; i < *n; ++i) {
    if (tvmrt_read_u64(r, &(*out)[i], field) != 0) return -1;
  }
  return 0;
}
