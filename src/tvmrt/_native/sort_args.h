/*
 * Argument checks and dtype helpers of the native sort family (sort.c): every tensor and
 * scalar a kernel passes is checked here before any memory is touched.
 */
#ifndef TVMRT_SORT_ARGS_H_
#define TVMRT_SORT_ARGS_H_

#include <stddef.h>
#include <stdint.h>

#include "native.h"

#define MAX_NDIM 64
#define TYPE_INT 0
#define TYPE_UINT 1
#define TYPE_FLOAT 2
#define CODE_INT 0
#define CODE_UINT 1
#define CODE_STR 11
#define CODE_DLTENSOR 7
#define CODE_NDARRAY 13
/* top-k below this k keeps a sorted candidate list; above, it sorts the whole row */
#define TOPK_SELECT_MAX 64

enum { D_F16, D_F32, D_F64, D_I8, D_U8, D_I32, D_I64, D_BAD };

/* tvmrt_fail with the message `func: message`; returns -1 */
int tvmrt_sort_fail(const char* func, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
const char* tvmrt_sort_dtype_name(DLDataType t, char* buf, size_t cap);
int tvmrt_sort_dkind(DLDataType t); /* D_* or D_BAD */
size_t tvmrt_sort_dsize(int kind);  /* bytes of one element */
int tvmrt_sort_is_float_kind(int kind);
int tvmrt_sort_get_tensor(const char* func, TVMValue* args, int* codes, int i, const char* what,
                          DLTensor** out);
int tvmrt_sort_get_int(const char* func, TVMValue* args, int* codes, int i, const char* what,
                       int64_t* out);
char* tvmrt_sort_data_of(const DLTensor* t);
int64_t tvmrt_sort_numel(const DLTensor* t);
int tvmrt_sort_norm_axis(const char* func, int64_t axis, int ndim, int* out);
void tvmrt_sort_split_axis(const DLTensor* t, int axis, int64_t* before, int64_t* after);
int tvmrt_sort_check_shape(const char* func, const DLTensor* in, const DLTensor* out, int axis,
                           int64_t axis_len, const char* what);

#endif /* TVMRT_SORT_ARGS_H_ */
