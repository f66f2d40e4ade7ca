/*
 * tvmrt's dlr.h: the C API of DLR 1.10 (SageMaker Neo's runtime) with DLR's names,
 * signatures and version macros, so that a program written against DLR's dlr.h builds by
 * changing the include and library flags (-ldlr: libdlr.so from tvmrt's C runtime).
 * Written for tvmrt from DLR's documented API; valid C (C99 and later) and C++.
 *
 * Every function returns 0 on success and -1 on error (DLRGetLastError() then gives the
 * reason as "<Class>: <message>"); GetDLRDeviceType returns the device type or -1. A handle
 * is passed by pointer; DeleteDLRModel sets it to NULL. Strings returned through `const
 * char**` live as long as the model (GetDLRVersion's and GetDLRBackend's for ever).
 *
 * What tvmrt runs: TVM graph-executor models on the CPU (a Neo folder's `.so`, graph `.json`
 * and `.params`, with or without `compiled.meta`) and Relay VM models on the CPU (`.ro`,
 * `.so` and `compiled.meta`, as DLR's RelayVMModel). Pipelines, Hexagon, Treelite and
 * TensorFlow models, custom allocators, CPU affinity and the DataTransform of AutoML models
 * are refused with an error that names them.
 */
#ifndef DLR_H_
#define DLR_H_

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#ifndef DLR_DLL
#if defined(_MSC_VER) || defined(_WIN32)
#define DLR_DLL __declspec(dllexport)
#else
#define DLR_DLL __attribute__((visibility("default")))
#endif
#endif

#define DLR_MAJOR 1
#define DLR_MINOR 10
#define DLR_PATCH 0
#define DLR_VERSION (DLR_MAJOR * 10000 + DLR_MINOR * 100 + DLR_PATCH)
#define DLR_MAKE_VERSION(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))

/*! \brief A model: what CreateDLRModel gives, freed by DeleteDLRModel. */
typedef void* DLRModelHandle;

#ifndef DLR_ALLOC_TYPEDEF
#define DLR_ALLOC_TYPEDEF
typedef void* (*DLRMallocFunctionPtr)(size_t);
typedef void (*DLRFreeFunctionPtr)(void*);
typedef void* (*DLRMemalignFunctionPtr)(size_t, size_t);
#endif

#ifndef DLR_MODEL_ELEM
#define DLR_MODEL_ELEM
/*! \brief The parts of a model given from memory or by path (CreateDLRModelFromModelElem). */
typedef enum DLRModelElemType {
  HEXAGON_LIB,
  NEO_METADATA,
  TVM_GRAPH,
  TVM_LIB,
  TVM_PARAMS,
  RELAY_EXEC
} DLRModelElemType;
typedef struct ModelElem {
  const DLRModelElemType type;
  const char* path; /* a file, or NULL to take `data` */
  const void* data; /* TVM_GRAPH, NEO_METADATA: NUL-terminated text; TVM_PARAMS: bytes */
  const size_t data_size;
} DLRModelElem;
#endif

/* -- create and delete ------------------------------------------------------------------ */
/* model_path: a folder, a file, or a colon-separated list of them; files are found by
   suffix. dev_type: DLPack's (1 = CPU); dev_id: the device's number. */
DLR_DLL int CreateDLRModel(DLRModelHandle* handle, const char* model_path, int dev_type,
                           int dev_id);
DLR_DLL int CreateDLRModelFromModelElem(DLRModelHandle* handle, const DLRModelElem* model_elems,
                                        size_t model_elems_size, int dev_type, int dev_id);
DLR_DLL int CreateDLRPipeline(DLRModelHandle* handle, int num_models, const char** model_paths,
                              int dev_type, int dev_id);
DLR_DLL int DeleteDLRModel(DLRModelHandle* handle);

/* -- run -------------------------------------------------------------------------------- */
DLR_DLL int RunDLRModel(DLRModelHandle* handle);

/* -- inputs (the graph's inputs less the weights the params set) -------------------------- */
DLR_DLL int GetDLRNumInputs(DLRModelHandle* handle, int* num_inputs);
DLR_DLL int GetDLRNumWeights(DLRModelHandle* handle, int* num_weights);
DLR_DLL int GetDLRInputName(DLRModelHandle* handle, int index, const char** input_name);
DLR_DLL int GetDLRInputType(DLRModelHandle* handle, int index, const char** input_type);
DLR_DLL int GetDLRWeightName(DLRModelHandle* handle, int index, const char** weight_name);
/* `input` holds the input's element count in its dtype; only the count of `shape` is
   checked against the input's, as DLR does */
DLR_DLL int SetDLRInput(DLRModelHandle* handle, const char* name, const int64_t* shape,
                        const void* input, int dim);
/* `tensor` is a DLTensor* */
DLR_DLL int SetDLRInputTensor(DLRModelHandle* handle, const char* name, void* tensor);
DLR_DLL int SetDLRInputTensorZeroCopy(DLRModelHandle* handle, const char* name, void* tensor);
DLR_DLL int GetDLRInput(DLRModelHandle* handle, const char* name, void* input);
DLR_DLL int GetDLRInputShape(DLRModelHandle* handle, int index, int64_t* shape);
DLR_DLL int GetDLRInputSizeDim(DLRModelHandle* handle, int index, int64_t* size, int* dim);

/* -- outputs ---------------------------------------------------------------------------- */
DLR_DLL int GetDLROutputShape(DLRModelHandle* handle, int index, int64_t* shape);
DLR_DLL int GetDLROutput(DLRModelHandle* handle, int index, void* out);
DLR_DLL int GetDLROutputPtr(DLRModelHandle* handle, int index, const void** out);
/* `tensor` is a DLTensor* of the output's shape and dtype */
DLR_DLL int GetDLROutputTensor(DLRModelHandle* handle, int index, void* tensor);
/* `*tensor` becomes a DLManagedTensor* viewing the output; call its deleter when done */
DLR_DLL int GetDLROutputManagedTensorPtr(DLRModelHandle* handle, int index, const void** tensor);
DLR_DLL int GetDLRNumOutputs(DLRModelHandle* handle, int* num_outputs);
DLR_DLL int GetDLROutputSizeDim(DLRModelHandle* handle, int index, int64_t* size, int* dim);
DLR_DLL int GetDLROutputType(DLRModelHandle* handle, int index, const char** output_type);

/* -- compiled.meta ------------------------------------------------------------------------ */
DLR_DLL int GetDLRHasMetadata(DLRModelHandle* handle, bool* has_metadata);
DLR_DLL int GetDLROutputName(DLRModelHandle* handle, const int index, const char** name);
DLR_DLL int GetDLROutputIndex(DLRModelHandle* handle, const char* name, int* index);
DLR_DLL int GetDLROutputByName(DLRModelHandle* handle, const char* name, void* out);

/* -- the rest ----------------------------------------------------------------------------- */
DLR_DLL const char* DLRGetLastError(void);
DLR_DLL int GetDLRBackend(DLRModelHandle* handle, const char** name);
DLR_DLL int GetDLRDeviceType(const char* model_path);
DLR_DLL int GetDLRVersion(const char** out);
DLR_DLL int SetDLRNumThreads(DLRModelHandle* handle, int threads);
DLR_DLL int UseDLRCPUAffinity(DLRModelHandle* handle, int use);
DLR_DLL int SetDLRCustomAllocatorMalloc(DLRMallocFunctionPtr custom_malloc_fn);
DLR_DLL int SetDLRCustomAllocatorFree(DLRFreeFunctionPtr custom_free_fn);
DLR_DLL int SetDLRCustomAllocatorMemalign(DLRMemalignFunctionPtr custom_memalign_fn);

#ifdef __cplusplus
}
#endif

#endif /* DLR_H_ */
