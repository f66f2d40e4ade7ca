"""Issue 11's runtime items: library reload and unload, kernel error text, thread counts.

The kernel libraries are tiny C files written against the legacy ABI (``__TVM*`` slots, as
TVM emits them), built here with the system C compiler; without one the tests skip.
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import tvmrt.runtime as rt
from tvmrt.error import KernelError, ModuleLoadError
from tvmrt.runtime import kernel_services, threads

HEADER = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef union { int64_t v_int64; double v_float64; void* v_handle; const char* v_str; } TVMValue;
#define SLOT __attribute__((weak, visibility("default")))
SLOT void (*__TVMAPISetLastError)(const char*) = 0;
SLOT void* __tvm_module_ctx = 0;
#define KERNEL(name) \
  int name(TVMValue* args, int* codes, int n, TVMValue* ret, int* rc, void* res)
"""

ERRORS_C = (
    HEADER
    + r"""
/* succeeds, but leaves a message behind (TVM kernels never do; a hostile one may) */
KERNEL(leave_message) { __TVMAPISetLastError("stale text from leave_message"); return 0; }
/* fails without a message */
KERNEL(fail_silently) { return -1; }
/* fails with a message of args[0] bytes */
KERNEL(fail_loudly) {
  size_t size = (size_t)args[0].v_int64;
  char* text = (char*)malloc(size + 1);
  if (text == NULL) return -2;
  memset(text, 'x', size);
  memcpy(text, "huge: ", 6);
  text[size] = '\0';
  __TVMAPISetLastError(text);
  free(text);
  return -1;
}
"""
)


def version_c(value: int) -> str:
    """A library whose ``version(out int64[1])`` writes ``value``; ``pad`` makes it big."""
    return (
        HEADER
        + f"""
typedef struct {{ void* data; int32_t dt, di, nd; uint8_t c, b; uint16_t l; }} DLTensor;
static const char pad[{4096 * (1 + value % 3)}] = {{1}};
KERNEL(version) {{ ((int64_t*)((DLTensor*)args[0].v_handle)->data)[0] = {value} + pad[0] - 1;
  return 0; }}
"""
    )


def build(source: str, out: Path) -> Path:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build test kernels")
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(src)], check=True)
    return out


@pytest.fixture(scope="module")
def errors(tmp_path_factory: pytest.TempPathFactory) -> rt.Module:
    return rt.load_module(build(ERRORS_C, tmp_path_factory.mktemp("errors") / "errors.so"))


def _version(module: rt.Module) -> int:
    out = rt.array(np.zeros(1, "int64"))
    module["version"](out)
    return int(out.numpy()[0])


# -- item 18: kernel error text -----------------------------------------------------------


def test_message_of_an_earlier_successful_call_is_not_reported(errors):
    errors["leave_message"]()
    with pytest.raises(KernelError, match=r"'fail_silently' returned -1 without setting an error"):
        errors["fail_silently"]()


def test_prepared_call_starts_with_an_empty_error_slot(errors):
    fn, args = errors["leave_message"].prepare_call([])
    fn(*args)
    fail, fail_args = errors["fail_silently"].prepare_call([])
    with pytest.raises(KernelError, match=r"without setting an error message"):
        fail(*fail_args)


def test_huge_kernel_message_is_cut_with_a_note(errors):
    size = int(os.environ.get("TVMRT_TEST_HUGE_MESSAGE", str(100 << 20)))
    with pytest.raises(KernelError) as info:
        errors["fail_loudly"](size)
    text = str(info.value)
    assert text.startswith("huge: xxx")
    assert text.endswith(f"... [cut by tvmrt: the message has {size} bytes]")
    assert len(text) < 70_000


# -- item 4: reloading a rebuilt library at the same path ---------------------------------


def test_library_rebuilt_at_the_same_path_runs_the_new_code(tmp_path):
    path = tmp_path / "model.so"
    first = rt.load_module(build(version_c(1), path))
    assert _version(first) == 1
    staged = build(version_c(2), tmp_path / "staged.so")
    os.replace(staged, path)  # a new inode at the same path, the old one still mapped
    second = rt.load_module(path)
    assert _version(second) == 2
    assert _version(first) == 1  # the first instance is untouched
    path.write_bytes(b"")  # the file truncated in place: loaded instances do not care
    assert _version(second) == 2


# -- item 15: libraries are unloaded with their last reference ------------------------------


def _mapped(path_part: str) -> int:
    with open("/proc/self/maps") as maps:
        return sum(path_part in line for line in maps)


def _open_memfds(name: str) -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += name in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
    return count


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_dropped_library_is_unmapped_and_its_memfd_closed(tmp_path):
    path = build(version_c(7), tmp_path / "unload_me.so")
    module = rt.load_module(path)
    assert _open_memfds("tvmrt:unload_me.so") == 1
    func = module["version"]
    assert _mapped("tvmrt:unload_me.so") > 0
    del module
    gc.collect()
    assert _mapped("tvmrt:unload_me.so") > 0  # a function still holds the library
    out = rt.array(np.zeros(1, "int64"))
    func(out)
    assert int(out.numpy()[0]) == 7
    del func
    gc.collect()
    assert _mapped("tvmrt:unload_me.so") == 0
    assert _open_memfds("tvmrt:unload_me.so") == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_many_distinct_libraries_loaded_and_dropped_do_not_accumulate(tmp_path):
    count = int(os.environ.get("TVMRT_TEST_UNLOAD_COUNT", "20"))
    paths = [build(version_c(100 + i), tmp_path / f"lib{i}.so") for i in range(count)]
    for i, path in enumerate(paths):
        module = rt.load_module(path)
        assert _version(module) == 100 + i
        del module
        gc.collect()
    assert _mapped("tvmrt:lib") == 0


# -- item 17: TVM_NUM_THREADS ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected", "warning"),
    [
        ("3", 3, None),
        (" 2 ", 2, None),
        ("4x", None, r"TVM_NUM_THREADS='4x' is not a positive whole number"),
        ("abc", None, r"TVM_NUM_THREADS='abc' is not a positive whole number"),
        ("0", None, r"is not a positive whole number"),
        ("-2", None, r"is not a positive whole number"),
        ("1_0", None, r"is not a positive whole number"),
        ("100000", "max", r"TVM_NUM_THREADS=100000 asks for more threads than tvmrt runs"),
    ],
)
def test_num_threads_parser(text, expected, warning):
    want = threads.max_threads() if expected == "max" else expected
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert threads.parse_num_threads("TVM_NUM_THREADS", text) == want
    messages = [str(w.message) for w in caught]
    if warning is None:
        assert messages == []
    else:
        assert len(messages) == 1
        assert re.search(warning, messages[0]), messages


def _child_threads(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    code = "from tvmrt.runtime import kernel_services; print(kernel_services.num_threads())"
    return subprocess.run(
        [sys.executable, "-W", "always", "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )


def test_bad_env_value_warns_and_the_native_pool_agrees():
    result = _child_threads(TVM_NUM_THREADS="4x", OMP_NUM_THREADS="2")
    assert result.stdout.strip() == "2"  # ignored TVM_NUM_THREADS: OMP_NUM_THREADS applies
    assert "TVM_NUM_THREADS='4x' is not a positive whole number" in result.stderr
    huge = _child_threads(TVM_NUM_THREADS="99999")
    assert huge.stdout.strip() == str(threads.max_threads())
    assert "asks for more threads than tvmrt runs" in huge.stderr


def test_set_num_threads_refuses_absurd_counts(threads_restored):
    with pytest.raises(ValueError, match=r"number of threads must be at most"):
        kernel_services.set_num_threads(threads.max_threads() + 1)


def test_refused_threads_are_reported_not_silent():
    # a child whose address space fits a few more 8 MB thread stacks, not 31
    code = (
        "import resource, warnings\n"
        "from tvmrt.runtime import kernel_services\n"
        "kernel_services.set_num_threads(1)\n"
        "size = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "resource.setrlimit(resource.RLIMIT_AS, (size + (40 << 20), resource.RLIM_INFINITY))\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    kernel_services.set_num_threads(32)\n"
        "print(kernel_services.num_threads(), '|', '; '.join(str(x.message) for x in w))\n"
    )
    env = {**os.environ, "TVM_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    count, _, message = result.stdout.partition("|")
    assert 1 <= int(count) < 32, result.stderr
    assert f"the thread pool could start only {int(count) - 1} of 31 worker threads" in message
    assert f"parallel kernels run on {int(count)} threads" in message


@pytest.fixture
def threads_restored():
    yield
    kernel_services.set_num_threads(0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /sys topology")
def test_default_is_one_thread_per_physical_core():
    # reference: the kernel's own list of hyper-thread siblings, one entry per core
    siblings = set()
    for cpu in os.sched_getaffinity(0):
        path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        siblings.add(path.read_text().strip() if path.exists() else str(cpu))
    assert threads.physical_cores() == len(siblings)
    assert 1 <= threads.physical_cores() <= threads.available_cpus()
    clean = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    code = "from tvmrt.runtime import kernel_services; print(kernel_services.num_threads())"
    out = subprocess.run(
        [sys.executable, "-c", code], env=clean, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == str(len(siblings))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_library_refused_after_dlopen_is_unloaded(tmp_path):
    source = HEADER + "int TVMArrayAlloc(void);\nKERNEL(needs) { return TVMArrayAlloc(); }\n"
    path = build(source, tmp_path / "refused_lib.so")
    for _ in range(3):
        with pytest.raises(ModuleLoadError, match=r"needs symbols .*: TVMArrayAlloc"):
            rt.load_module(path)
    assert _mapped("tvmrt:refused_lib.so") == 0
    assert _open_memfds("tvmrt:refused_lib.so") == 0
