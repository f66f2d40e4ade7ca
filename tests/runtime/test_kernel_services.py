"""The native backend (workspace, thread pool, errors, function environment).

Tier: cpu. The kernels are tiny C libraries written against the legacy ABI the way TVM
emits them (``__TVMBackend*`` slots), built with the system C compiler in a temporary
folder; without a compiler these tests are skipped.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tvmrt.runtime as rt
from tvmrt.error import ArrayError, KernelError
from tvmrt.runtime import kernel_services
from tvmrt.runtime.loaders import LibraryModule
from tvmrt.runtime.registry import register_func, remove_global_func

pytestmark = pytest.mark.arm  # numpy-only: also runs on emulated ARM (make test-arm)

KERNELS_C = r"""
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef union { int64_t v_int64; double v_float64; void* v_handle; const char* v_str; } TVMValue;
typedef struct { void* sync_handle; int32_t num_task; } TVMParallelGroupEnv;
typedef int (*FTVMParallelLambda)(int, TVMParallelGroupEnv*, void*);
typedef struct {
  void* data; int32_t device_type; int32_t device_id; int32_t ndim;
  uint8_t code; uint8_t bits; uint16_t lanes;
  int64_t* shape; int64_t* strides; uint64_t byte_offset;
} DLTensor;

/* context slots, declared the way TVM's codegen declares them (weak, NULL) */
#define SLOT __attribute__((weak, visibility("default")))
SLOT void* (*__TVMBackendAllocWorkspace)(int, int, uint64_t, int, int) = 0;
SLOT int (*__TVMBackendFreeWorkspace)(int, int, void*) = 0;
SLOT int (*__TVMBackendParallelLaunch)(FTVMParallelLambda, void*, int) = 0;
SLOT int (*__TVMBackendParallelBarrier)(int, TVMParallelGroupEnv*) = 0;
SLOT void (*__TVMAPISetLastError)(const char*) = 0;
SLOT int (*__TVMBackendGetFuncFromEnv)(void*, const char*, void**) = 0;
SLOT int (*__TVMFuncCall)(void*, TVMValue*, int*, int, TVMValue*, int*) = 0;
SLOT void* __tvm_module_ctx = 0;
__attribute__((weak, visibility("default"))) const char __tvm_main__[] = "record_tasks";

#define TENSOR(i) ((DLTensor*)args[i].v_handle)

static double now_s(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* --- record_tasks(out int64[64, 4]): per task id: calls, num_task, thread, saw all ---- */
typedef struct { int64_t* out; int arrived; } record_ctx;

static int record_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  record_ctx* ctx = (record_ctx*)cdata;
  int64_t* row = ctx->out + 4 * task_id;
  double deadline = now_s() + 2.0;
  __atomic_fetch_add(&row[0], 1, __ATOMIC_SEQ_CST);
  row[1] = penv->num_task;
  row[2] = (int64_t)(uintptr_t)pthread_self();
  __atomic_fetch_add(&ctx->arrived, 1, __ATOMIC_SEQ_CST);
  /* wait (bounded) until every task has started: proves they run at the same time */
  while (__atomic_load_n(&ctx->arrived, __ATOMIC_SEQ_CST) < penv->num_task && now_s() < deadline)
    sched_yield();
  row[3] = __atomic_load_n(&ctx->arrived, __ATOMIC_SEQ_CST) >= penv->num_task;
  return 0;
}

int record_tasks(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  record_ctx ctx;
  ctx.out = (int64_t*)TENSOR(0)->data;
  ctx.arrived = 0;
  return __TVMBackendParallelLaunch(record_task, &ctx, 0);
}

/* --- barrier_rounds(out int64[1]): R rounds of write / barrier / check neighbour ------ */
typedef struct { int64_t slots[256]; int64_t errors; int rounds; } barrier_ctx;

static int barrier_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  barrier_ctx* ctx = (barrier_ctx*)cdata;
  int n = penv->num_task, r;
  for (r = 0; r < ctx->rounds; ++r) {
    int next = (task_id + 1) % n;
    __atomic_store_n(&ctx->slots[task_id], (int64_t)r * 1000 + task_id, __ATOMIC_SEQ_CST);
    if (__TVMBackendParallelBarrier(task_id, penv) != 0) return -1;
    if (__atomic_load_n(&ctx->slots[next], __ATOMIC_SEQ_CST) != (int64_t)r * 1000 + next)
      __atomic_fetch_add(&ctx->errors, 1, __ATOMIC_SEQ_CST);
    if (__TVMBackendParallelBarrier(task_id, penv) != 0) return -1;
  }
  return 0;
}

int barrier_rounds(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  barrier_ctx ctx;
  memset(&ctx, 0, sizeof(ctx));
  ctx.rounds = (int)args[1].v_int64;
  if (__TVMBackendParallelLaunch(barrier_task, &ctx, 0) != 0) return -1;
  ((int64_t*)TENSOR(0)->data)[0] = ctx.errors;
  return 0;
}

/* --- workspace_stress(out int64[2], rounds): alloc/check/free in every task ------------ */
typedef struct { int rounds; int64_t misaligned; int64_t corrupt; } ws_ctx;

static int ws_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  ws_ctx* ctx = (ws_ctx*)cdata;
  int r, k;
  for (r = 0; r < ctx->rounds; ++r) {
    unsigned char* blocks[6];
    uint64_t sizes[6];
    for (k = 0; k < 6; ++k) {
      sizes[k] = 1 + (uint64_t)((k * 7919 + r * 31 + task_id * 131) % 5000) * 3;
      blocks[k] = (unsigned char*)__TVMBackendAllocWorkspace(1, 0, sizes[k], 2, 32);
      if (blocks[k] == 0) return -1;
      if (((uintptr_t)blocks[k] & 63) != 0) __atomic_fetch_add(&ctx->misaligned, 1, __ATOMIC_SEQ_CST);
      memset(blocks[k], (task_id * 6 + k) & 0xff, sizes[k]);
    }
    for (k = 5; k >= 0; --k) {
      uint64_t i;
      for (i = 0; i < sizes[k]; ++i) {
        if (blocks[k][i] != ((task_id * 6 + k) & 0xff)) {
          __atomic_fetch_add(&ctx->corrupt, 1, __ATOMIC_SEQ_CST);
          break;
        }
      }
      if (__TVMBackendFreeWorkspace(1, 0, blocks[k]) != 0) return -1;
    }
  }
  return 0;
}

int workspace_stress(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  ws_ctx ctx;
  int64_t* out = (int64_t*)TENSOR(0)->data;
  ctx.rounds = (int)args[1].v_int64;
  ctx.misaligned = 0;
  ctx.corrupt = 0;
  if (__TVMBackendParallelLaunch(ws_task, &ctx, 0) != 0) return -1;
  out[0] = ctx.misaligned;
  out[1] = ctx.corrupt;
  return 0;
}

/* --- workspace_reuse(out int64[4]): addresses of alloc, free, alloc (same size) ------- */
int workspace_reuse(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  int64_t* out = (int64_t*)TENSOR(0)->data;
  void* a = __TVMBackendAllocWorkspace(1, 0, 4000, 2, 32);
  void* b = __TVMBackendAllocWorkspace(1, 0, 4000, 2, 32);
  if (a == 0 || b == 0) return -1;
  __TVMBackendFreeWorkspace(1, 0, b);
  __TVMBackendFreeWorkspace(1, 0, a);
  out[0] = (int64_t)(uintptr_t)a;
  out[1] = (int64_t)(uintptr_t)b;
  out[2] = (int64_t)(uintptr_t)__TVMBackendAllocWorkspace(1, 0, 4000, 2, 32); /* LIFO: a */
  out[3] = (int64_t)(uintptr_t)__TVMBackendAllocWorkspace(1, 0, 3990, 2, 32); /* same class: b */
  __TVMBackendFreeWorkspace(1, 0, (void*)(uintptr_t)out[3]);
  __TVMBackendFreeWorkspace(1, 0, (void*)(uintptr_t)out[2]);
  return 0;
}

/* --- workspace_gpu(): asks for device memory, which tvmrt does not provide ------------ */
int workspace_gpu(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  if (__TVMBackendAllocWorkspace(2, 0, 64, 2, 32) == 0) return -1;
  return 0;
}

/* --- failures -------------------------------------------------------------------------- */
int fail_kernel(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  __TVMAPISetLastError("Assert fail: custom failure in fail_kernel");
  return -1;
}

static int failing_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  if (task_id == penv->num_task - 1) {
    __TVMAPISetLastError("task failed on its worker thread");
    return -1;
  }
  return 0;
}

int fail_in_task(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  return __TVMBackendParallelLaunch(failing_task, 0, 0);
}

/* --- nested_launch(out int64[64]): inner num_task seen by each outer task ------------ */
static int inner_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  *(int64_t*)cdata = penv->num_task;
  return 0;
}

static int outer_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  int64_t* out = (int64_t*)cdata;
  return __TVMBackendParallelLaunch(inner_task, &out[task_id], 0);
}

int nested_launch(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  return __TVMBackendParallelLaunch(outer_task, TENSOR(0)->data, 0);
}

/* --- call_env(x float32[4], y float32[4]): calls a packed function from the env ----- */
int call_env(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  static void* handle = 0;
  TVMValue cargs[3], cret;
  int ccodes[3], cret_code = 4;
  if (handle == 0 && __TVMBackendGetFuncFromEnv(__tvm_module_ctx, args[2].v_str, &handle) != 0)
    return -1;
  cargs[0] = args[0]; ccodes[0] = 7;
  cargs[1] = args[1]; ccodes[1] = 7;
  cargs[2].v_int64 = 3; ccodes[2] = 0;
  if (__TVMFuncCall(handle, cargs, ccodes, 3, &cret, &cret_code) != 0) return -1;
  *ret = cret;
  *rc = cret_code;
  return 0;
}

int lookup_missing(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  void* handle = 0;
  return __TVMBackendGetFuncFromEnv(__tvm_module_ctx, "no.such.function", &handle);
}

/* --- add_scalar(x float32[4], y float32[4], k int): y = x + k (a kernel found via env) */
int add_scalar(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  float* x = (float*)TENSOR(0)->data;
  float* y = (float*)TENSOR(1)->data;
  int i;
  if (n != 3 || codes[0] != 7 || codes[1] != 7 || codes[2] != 0) {
    __TVMAPISetLastError("add_scalar: bad arguments");
    return -1;
  }
  for (i = 0; i < 4; ++i) y[i] = x[i] + (float)args[2].v_int64;
  return 0;
}

/* --- echo(...): returns its first argument (checks value passing both ways) --------- */
int echo(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  if (n < 1) return 0;
  *ret = args[0];
  *rc = codes[0];
  return 0;
}
"""

# A C-target style kernel: the backend functions are undefined symbols, resolved at load.
CTARGET_C = r"""
#include <stdint.h>
#include <string.h>
typedef union { int64_t v_int64; double v_float64; void* v_handle; const char* v_str; } TVMValue;
void* TVMBackendAllocWorkspace(int, int, uint64_t, int, int);
int TVMBackendFreeWorkspace(int, int, void*);
void TVMAPISetLastError(const char*);
void* __tvm_module_ctx = 0;

int ctarget_kernel(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res) {
  char* p = (char*)TVMBackendAllocWorkspace(1, 0, 100000, 2, 32);
  if (p == 0) return -1;
  memset(p, 1, 100000);
  TVMBackendFreeWorkspace(1, 0, p);
  if (n > 0 && args[0].v_int64 < 0) {
    TVMAPISetLastError("ctarget_kernel: negative argument");
    return -1;
  }
  return 0;
}
"""


def _compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def build_shared(source: str, directory: Path, name: str) -> Path:
    """Compile ``source`` into ``directory/name.so`` (skips the test without a compiler)."""
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler to build test kernels")
    src = directory / f"{name}.c"
    out = directory / f"{name}.so"
    src.write_text(source)
    cmd = [cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(src), "-lpthread"]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> LibraryModule:
    path = build_shared(KERNELS_C, tmp_path_factory.mktemp("kernels"), "kernels")
    module = rt.load_module(path)
    assert isinstance(module, LibraryModule)
    return module


@pytest.fixture
def threads() -> Iterator[None]:
    """Restore the pool size after a test changes it."""
    yield
    kernel_services.set_num_threads(0)


def _record(kernels: LibraryModule) -> np.ndarray:
    out = rt.array(np.zeros((64, 4), dtype="int64"))
    kernels["record_tasks"](out)
    return out.numpy()


# -- parallel launch -----------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_launch_runs_every_task_id_once(kernels, threads, n):
    kernel_services.set_num_threads(n)
    assert kernel_services.num_threads() == n
    rows = _record(kernels)
    assert rows[:n, 0].tolist() == [1] * n  # each id exactly once
    assert rows[n:, 0].tolist() == [0] * (64 - n)
    assert rows[:n, 1].tolist() == [n] * n  # penv->num_task
    assert rows[:n, 3].all()  # all tasks were running at the same time


def test_launch_uses_distinct_threads(kernels, threads):
    kernel_services.set_num_threads(3)
    rows = _record(kernels)
    assert len(set(rows[:3, 2].tolist())) == 3


def test_entry_function_is_main(kernels, threads):
    kernel_services.set_num_threads(2)
    out = rt.array(np.zeros((64, 4), dtype="int64"))
    kernels.entry_func(out)
    assert out.numpy()[:2, 0].tolist() == [1, 1]


def test_launch_counts_in_stats(kernels, threads):
    kernel_services.set_num_threads(2)
    kernel_services.reset_stats()
    for _ in range(5):
        _record(kernels)
    stats = kernel_services.stats()
    assert stats.launches == 5
    assert stats.serial_launches == 0


def test_barrier_synchronises_tasks(kernels, threads):
    for n in (2, 3, 4):
        kernel_services.set_num_threads(n)
        out = rt.array(np.full(1, -1, dtype="int64"))
        kernels["barrier_rounds"](out, 200)
        assert out.numpy()[0] == 0


def test_barrier_single_task(kernels, threads):
    kernel_services.set_num_threads(1)
    out = rt.array(np.full(1, -1, dtype="int64"))
    kernels["barrier_rounds"](out, 10)
    assert out.numpy()[0] == 0


def test_nested_launch_runs_serially(kernels, threads):
    kernel_services.set_num_threads(3)
    out = rt.array(np.zeros(64, dtype="int64"))
    kernels["nested_launch"](out)
    assert out.numpy()[:3].tolist() == [1, 1, 1]


def test_concurrent_launches_do_not_deadlock(kernels, threads):
    kernel_services.set_num_threads(2)
    errors: list[str] = []

    def worker() -> None:
        try:
            for _ in range(200):
                rows = _record(kernels)
                n = int(rows[0, 1])
                assert n in (1, 2)
                assert rows[:n, 0].tolist() == [1] * n
                assert rows[n:, 0].sum() == 0
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))

    pool = [threading.Thread(target=worker) for _ in range(4)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in pool), "launches deadlocked"
    assert errors == []


def test_set_num_threads_validates():
    with pytest.raises(ValueError, match=r"^number of threads must be >= 0"):
        kernel_services.set_num_threads(-1)
    with pytest.raises(TypeError):
        kernel_services.set_num_threads(2.0)  # type: ignore[arg-type]


def test_num_threads_is_the_pool_size(threads):
    kernel_services.set_num_threads(5)
    assert rt.num_threads() == 5
    kernel_services.set_num_threads(0)
    assert rt.num_threads() == rt.threads.default_num_threads()


def _run_python(code: str, **env: str) -> str:
    full_env = {
        k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")
    }
    full_env.update(env)
    result = subprocess.run(
        [sys.executable, "-c", code], env=full_env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def test_tvm_num_threads_is_honoured(kernels):
    code = (
        "import numpy as np, tvmrt.runtime as rt\n"
        "from tvmrt.runtime import kernel_services\n"
        f"m = rt.load_module({str(kernels.path)!r})\n"
        "out = rt.array(np.zeros((64, 4), dtype='int64'))\n"
        "m['record_tasks'](out)\n"
        "rows = out.numpy()\n"
        "print(kernel_services.num_threads(), int(rows[0, 1]), int(rows[:, 0].sum()))\n"
    )
    assert _run_python(code, TVM_NUM_THREADS="3") == "3 3 3"
    assert _run_python(code, OMP_NUM_THREADS="2") == "2 2 2"
    assert _run_python(code, TVM_NUM_THREADS="1", OMP_NUM_THREADS="4") == "1 1 1"


# -- workspace ---------------------------------------------------------------------------


def test_workspace_is_aligned_and_private_per_task(kernels, threads):
    for n in (1, 2, 4):
        kernel_services.set_num_threads(n)
        out = rt.array(np.full(2, -1, dtype="int64"))
        kernels["workspace_stress"](out, 50)
        assert out.numpy().tolist() == [0, 0]  # no misaligned block, no overwritten block


def test_workspace_from_many_python_threads(kernels, threads):
    kernel_services.set_num_threads(2)
    failures: list[str] = []

    def worker() -> None:
        try:
            out = rt.array(np.full(2, -1, dtype="int64"))
            for _ in range(20):
                kernels["workspace_stress"](out, 5)
                assert out.numpy().tolist() == [0, 0]
        except Exception as exc:  # pragma: no cover - reported below
            failures.append(repr(exc))

    pool = [threading.Thread(target=worker) for _ in range(6)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=60)
    assert failures == []
    assert kernel_services.stats().workspace_bytes_in_use == 0


def test_workspace_reuses_freed_blocks(kernels):
    out = rt.array(np.zeros(4, dtype="int64"))
    kernels["workspace_reuse"](out)
    a, b, again_a, again_b = out.numpy().tolist()
    assert a % 64 == 0
    assert b % 64 == 0
    assert a != b
    assert again_a == a  # LIFO: the last freed block of that size comes back first
    assert again_b == b  # 3990 rounds up to the same 64-byte size class


def test_workspace_steady_state_does_not_allocate(kernels, threads):
    kernel_services.set_num_threads(2)
    out = rt.array(np.zeros(2, dtype="int64"))
    kernels["workspace_stress"](out, 3)  # warm the caches
    kernel_services.reset_stats()
    kernels["workspace_stress"](out, 3)
    stats = kernel_services.stats()
    assert stats.workspace_allocs == stats.workspace_frees == 2 * 3 * 6
    assert stats.workspace_system_allocs == 0


def test_workspace_on_another_device_fails_with_message(kernels):
    # before a device backend installs its workspace hook, the C side refuses by itself
    # (or, once the CUDA backend is loaded on a machine with no NVIDIA driver, it refuses)
    either = (
        r"device type 2 is not supported|no backend for device cuda\(0\)"
        r"|cannot load the NVIDIA driver library"
    )
    with pytest.raises(KernelError, match=rf"TVMBackendAllocWorkspace: .*({either})"):
        kernels["workspace_gpu"]()


def test_release_workspace_cache():
    kernel_services.release_workspace_cache()
    before = kernel_services.stats().workspace_bytes_cached
    assert before >= 0


# -- errors --------------------------------------------------------------------------------


def test_kernel_error_carries_the_kernel_message(kernels):
    with pytest.raises(KernelError, match=r"^Assert fail: custom failure in fail_kernel$"):
        kernels["fail_kernel"]()
    assert kernel_services.take_last_error() == ""  # taken by the raise


def test_error_from_a_worker_thread_reaches_the_caller(kernels, threads):
    kernel_services.set_num_threads(3)
    with pytest.raises(KernelError, match=r"^task failed on its worker thread$"):
        kernels["fail_in_task"]()


def test_prepared_call_raises_kernel_error(kernels):
    fn, args = kernels["fail_kernel"].prepare_call([])
    with pytest.raises(KernelError, match="custom failure"):
        fn(*args)
    bound = kernels["fail_kernel"].bind_arrays([])
    with pytest.raises(KernelError, match="custom failure"):
        bound()


def test_error_slot_is_per_thread():
    kernel_services.set_last_error("main thread error")
    seen: list[str] = []
    t = threading.Thread(target=lambda: seen.append(kernel_services.take_last_error()))
    t.start()
    t.join()
    assert seen == [""]
    assert kernel_services.take_last_error_with_kind() == ("", "main thread error")
    assert kernel_services.take_last_error() == ""


# -- function environment (call_packed) --------------------------------------------------


def test_call_packed_reaches_a_global_python_function(kernels):
    calls = []

    def callback(x, y, k):
        calls.append(k)
        y.copyfrom(x.numpy() * 2 + k)
        return 7

    register_func("tvmrt.test.callback", callback, override=True)
    try:
        x = rt.array(np.arange(4, dtype="float32"))
        y = rt.empty((4,), "float32")
        assert kernels["call_env"](x, y, "tvmrt.test.callback") == 7
        np.testing.assert_array_equal(y.numpy(), np.arange(4, dtype="float32") * 2 + 3)
        assert calls == [3]
    finally:
        remove_global_func("tvmrt.test.callback")


def test_call_packed_finds_the_library_own_kernel(tmp_path):
    # a fresh build: call_env caches its handle in a static, per library
    module = rt.load_module(build_shared(KERNELS_C, tmp_path, "kernels2"))
    x = rt.array(np.arange(4, dtype="float32"))
    y = rt.empty((4,), "float32")
    module["call_env"](x, y, "add_scalar")
    np.testing.assert_array_equal(y.numpy(), np.arange(4, dtype="float32") + 3)


def test_call_packed_missing_function_raises(kernels):
    with pytest.raises(KernelError, match=r"cannot find function 'no.such.function'"):
        kernels["lookup_missing"]()


def test_python_callback_exception_becomes_kernel_error(tmp_path):
    module = rt.load_module(build_shared(KERNELS_C, tmp_path, "kernels3"))

    def broken(x, y, k):
        raise ValueError("broken callback")

    register_func("tvmrt.test.broken", broken, override=True)
    try:
        x = rt.array(np.zeros(4, dtype="float32"))
        with pytest.raises(KernelError, match=r"^ValueError: broken callback$"):
            module["call_env"](x, rt.empty((4,), "float32"), "tvmrt.test.broken")
    finally:
        remove_global_func("tvmrt.test.broken")


@pytest.mark.parametrize(
    "value",
    [0, -5, 2**40, 1.5, "text", None, b"\x00bytes", rt.cpu(0), rt.DataType("float16x4")],
    ids=["zero", "neg", "big", "float", "str", "none", "bytes", "device", "dtype"],
)
def test_values_round_trip_through_a_kernel(kernels, value):
    result = kernels["echo"](value)
    if isinstance(value, bytes):
        assert result == value
    else:
        assert result == value


def test_tensor_round_trips_as_a_view(kernels):
    x = rt.array(np.arange(6, dtype="float32").reshape(2, 3))
    view = kernels["echo"](x)
    np.testing.assert_array_equal(view.numpy(), x.numpy())
    assert view.data_ptr == x.data_ptr


def test_unsupported_argument_type(kernels):
    with pytest.raises(TypeError, match=r"argument 0 of type list cannot be passed"):
        kernels["echo"]([1, 2])


def test_misaligned_tensor_is_refused(kernels):
    base = rt.array(np.zeros(32, dtype="float32"))
    view = base._create_view((4,), relative_byte_offset=4)
    with pytest.raises(ArrayError, match=r"not 64-byte aligned"):
        kernels["echo"](view)


# -- C-target kernels (backend functions as undefined symbols) ----------------------------


def test_c_target_library_resolves_backend_symbols(tmp_path):
    module = rt.load_module(build_shared(CTARGET_C, tmp_path, "ctarget"))
    assert module["ctarget_kernel"](1) is None
    with pytest.raises(KernelError, match=r"^ctarget_kernel: negative argument$"):
        module["ctarget_kernel"](-1)


def test_slot_addresses_cover_every_slot():
    slots = kernel_services.slot_addresses()
    assert set(slots) == set(kernel_services.SLOT_FUNCTIONS)
    assert all(isinstance(a, int) and a for a in slots.values())


def test_pool_works_after_fork(kernels):
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    code = (
        "import os, numpy as np, tvmrt.runtime as rt\n"
        "from tvmrt.runtime import kernel_services\n"
        f"m = rt.load_module({str(kernels.path)!r})\n"
        "kernel_services.set_num_threads(2)\n"
        "def run():\n"
        "    out = rt.array(np.zeros((64, 4), dtype='int64'))\n"
        "    m['record_tasks'](out)\n"
        "    return out.numpy()[:, 0].tolist()[:3]\n"
        "assert run() == [1, 1, 0]\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0 if run() == [1, 1, 0] else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status), run())\n"
    )
    assert _run_python(code) == "0 [1, 1, 0]"


def test_native_library_is_importable():
    import importlib

    module = importlib.import_module("tvmrt._native_backend")
    assert module.__name__ == "tvmrt._native_backend"
    assert kernel_services.available()
    # the services are the C runtime's library, the one C programs link
    assert Path(kernel_services.library_path()).name == "libtvmrt_runtime.so"


def test_ffi_error_setters_store_kind_and_joined_parts():
    addresses = kernel_services.ffi_error_addresses()
    set_one = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p)(
        addresses["TVMFFIErrorSetRaisedFromCStr"]
    )
    set_parts = ctypes.CFUNCTYPE(
        None, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int32
    )(addresses["TVMFFIErrorSetRaisedFromCStrParts"])
    set_one(b"TypeError", b"Mismatched A.dtype")
    assert kernel_services.take_last_error_with_kind() == ("TypeError", "Mismatched A.dtype")
    parts = (ctypes.c_char_p * 3)(b"Invalid A.shape[0]", b" on argument #0", b", expected 1024")
    set_parts(b"ValueError", parts, 3)
    assert kernel_services.take_last_error_with_kind() == (
        "ValueError",
        "Invalid A.shape[0] on argument #0, expected 1024",
    )
    assert kernel_services.take_last_error_with_kind() == ("", "")
