/*
 * A small bounded JSON reader for graph JSON: the whole text is parsed into a tree (depth
 * at most RT_JSON_MAX_DEPTH, no read past `len`, NUL bytes rejected); errors name the byte
 * offset.
 */
#ifndef TVMRT_NATIVE_RUNTIME_JSON_H_
#define TVMRT_NATIVE_RUNTIME_JSON_H_

#include <stddef.h>
#include <stdint.h>

enum { RT_JSON_NULL, RT_JSON_BOOL, RT_JSON_NUMBER, RT_JSON_STRING, RT_JSON_ARRAY, RT_JSON_OBJECT };

typedef struct tvmrt_json {
  int type;
  int is_int;   /* a number written without fraction or exponent that fits int64 */
  int64_t i;    /* numbers (integral part), booleans */
  double d;     /* numbers */
  char* str;    /* strings (NUL-terminated, UTF-8) */
  size_t count; /* arrays and objects */
  struct tvmrt_json* items;
  char** keys; /* objects */
} tvmrt_json;

/* 0 and *out (free with tvmrt_json_free), or -1 with an error set ("GraphFormatError") */
int tvmrt_json_parse(const char* text, size_t len, tvmrt_json** out);
void tvmrt_json_free(tvmrt_json* v);
/* the member `key` of an object (the last one if repeated), or NULL */
const tvmrt_json* tvmrt_json_get(const tvmrt_json* obj, const char* key);

#endif /* TVMRT_NATIVE_RUNTIME_JSON_H_ */
