"""An MLF AOT package built into firmware for a board: the package's code, tvmrt's micro
runtime, the board's start-up and a generated harness, linked by a cross compiler.

The harness (``main.c``, written here) reads the inputs from the host file
``tvmrt-inputs.bin`` over semihosting into RAM buffers, calls the package's entry (the
``c`` interface with its two structs, or the ``packed`` interface with ``DLTensor``
handles), counts the processor clock SysTick sees, measures the stack's high-water mark
(the stack is painted at reset) and writes the outputs to ``tvmrt-outputs.bin``; so one
firmware runs any inputs. Each part is compiled to its own objects, so the linker's map
attributes every byte to a part (:mod:`.footprint`).

An object-code package (``llvm -mtriple=thumbv7m...``: ``codegen/host/lib/*.o``) is linked
as it is, after its objects are checked to be 32-bit Arm with the board's float ABI.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from tvmrt.binfmt.binary import ElfFile
from tvmrt.error import ModuleLoadError, UsageError
from tvmrt.micro.boards import Board
from tvmrt.micro.footprint import Footprint, read_map
from tvmrt.micro.graph_plan import GRAPH_ENTRY, c_dltensor, c_shape, plan_graph
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.loaders import link
from tvmrt.runtime.loaders.mlf_aot import read_package
from tvmrt.runtime.loaders.mlf_aot_package import CrtTensor, MlfAotPackage, describe

__all__ = [
    "Firmware",
    "build_firmware",
    "find_cross_compiler",
    "include_dirs",
    "port_files",
    "runtime_sources",
]

HERE = Path(__file__).resolve().parent
CRT = HERE.parent / "runtime" / "crt"  # the CRT's C, shared with the host's MLF builds
BOARD_FILES = HERE / "boards"
DEFAULT_STACK_BYTES = 16 << 10
_COMPILE_TIMEOUT_S = 600
_WORKSPACE_SLACK = 256  # the stack allocator rounds each block up to 16 bytes
# flags of every compile: sections per function and object so --gc-sections keeps only what
# is called, and the map names each object's share
_CFLAGS = (
    "-std=gnu11",
    "-O2",
    "-ffp-contract=off",
    "-ffunction-sections",
    "-fdata-sections",
    "-Wall",
)


@dataclass
class Firmware:
    """A linked firmware image and what it holds."""

    elf: Path
    board: Board
    package: MlfAotPackage
    workspace_bytes: int  # the platform's static workspace (0: the model's own pools)
    stack_bytes: int
    footprint: Footprint
    compiler: list[str] = field(default_factory=list)

    @property
    def input_bytes(self) -> int:
        return sum(t.size for t in self.package.inputs)


def find_cross_compiler(cc: str | None) -> list[str]:
    """The C compiler for Cortex-M: ``cc`` (a command line), else ``arm-none-eabi-gcc``.

    Raises
    ------
    UsageError
        If none is found (the message names Debian's package).
    """
    command = cc.split() if cc else ["arm-none-eabi-gcc"]
    if shutil.which(command[0]) is None:
        raise UsageError(
            f"the Cortex-M C compiler {command[0]!r} was not found; install Arm's GNU toolchain "
            "(Debian: apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi) or name one "
            "with --cc"
        )
    return command


def runtime_sources() -> list[Path]:
    """tvmrt's micro runtime: the C files a firmware project compiles."""
    return [CRT / "crt_backend.c", CRT / "stack_allocator.c"]


def port_files() -> list[Path]:
    """The emulated boards' files: the platform port (an example of one), start-up,
    semihosting and the linker script."""
    names = ("platform.c", "cortex_m_startup.c", "semihost.c", "semihost.h", "cortex_m.ld")
    return [BOARD_FILES / n for n in names]


def include_dirs() -> list[Path]:
    """The include folder of the micro runtime: tvmrt's headers, at TVM's paths
    (``tvm/runtime/c_runtime_api.h``, ``tvm/runtime/crt/platform.h``, ...)."""
    return [link.include_dir()]


def build_firmware(
    path: str,
    board: Board,
    output: Path | None = None,
    *,
    cc: str | None = None,
    stack_bytes: int = DEFAULT_STACK_BYTES,
    work: Path | None = None,
) -> Firmware:
    """Build the MLF AOT package at ``path`` (tar or folder) into firmware for ``board``.

    ``output`` names the ELF (default: ``firmware.elf`` in ``work``, a folder kept with the
    objects and the linker's map).

    Raises
    ------
    ModuleLoadError
        If the package cannot run on a microcontroller (each reason named) or compiling or
        linking fails (the compiler's last lines).
    UsageError
        If no cross compiler is found.
    """
    shown = os.path.basename(path.rstrip("/")) or path
    files = read_package(path, shown)
    package = describe(files, shown, micro=True)
    if package.blockers:
        raise ModuleLoadError("; ".join(package.blockers))
    if not 1024 <= stack_bytes <= board.ram[1] // 2:
        raise UsageError(
            f"a stack of {stack_bytes} bytes: expected 1024 to {board.ram[1] // 2} on {board.name}"
        )
    objects_in = [
        (n, d)
        for n, d in sorted(files.items())
        if n.startswith("codegen/host/lib/") and n.endswith(".o")
    ]
    elves = [check_arm_object(data, name, shown, board) for name, data in objects_in]
    symbols = {
        s.name
        for elf in elves
        for s in elf.symbols(dynamic=False)
        if s.defined and s.bind != "local"
    }
    plan = plan_graph(package, files) if package.interface == "graph" else None
    if not package.sources:
        _object_entry(package, symbols)
    compiler = find_cross_compiler(cc)
    work = work or Path(tempfile.mkdtemp(prefix="tvmrt-micro-"))
    workspace = _platform_workspace(package)
    defines = [f"-DTVMRT_WORKSPACE_BYTES={workspace}", f"-DTVMRT_CPU_HZ={board.cpu_hz}u"]
    include = work / "include"
    include.mkdir(parents=True, exist_ok=True)
    for name, data in package.headers:
        base = PurePosixPath(name).name
        if re.fullmatch(r"[\w.-]+\.h", base):
            (include / base).write_bytes(data)
    flags = [*_CFLAGS, *board.cflags, *defines, "-I", str(include)]
    for folder in (*include_dirs(), BOARD_FILES):
        flags += ["-I", str(folder)]
    objects: list[Path] = []
    model: list[tuple[str, Path | bytes]] = []
    for i, (name, data) in enumerate(package.sources):
        base = PurePosixPath(name).name  # the compiler's messages name the member
        model.append((f"{i}-{base}" if re.fullmatch(r"[\w.-]+\.c", base) else f"{i}.c", data))
    if plan is not None:
        model.append(("tvmrt_graph_plan.c", plan.encode()))
    parts: dict[str, list[tuple[str, Path | bytes]]] = {
        "model": model,
        "runtime": [(p.name, p) for p in (*runtime_sources(), BOARD_FILES / "platform.c")],
        "board": [(n, BOARD_FILES / n) for n in ("cortex_m_startup.c", "semihost.c")],
        "harness": [("main.c", harness_source(package).encode())],
    }
    for part, sources in parts.items():
        folder = work / part
        folder.mkdir(exist_ok=True)
        for name, source in sources:
            c_file = folder / name
            if isinstance(source, bytes):
                c_file.write_bytes(source)
            else:
                shutil.copyfile(source, c_file)
            obj = c_file.with_suffix(".o")
            _run(compiler, [*flags, "-c", str(c_file), "-o", str(obj)], shown, f"compiling {name}")
            objects.append(obj)
    for name, data in objects_in:
        obj = work / "model" / PurePosixPath(name).name
        obj.write_bytes(data)
        objects.append(obj)
    elf = output or work / "firmware.elf"
    map_file = work / "firmware.map"
    flash, ram = board.flash, board.ram
    memory = (
        f"--defsym=tvmrt_flash_origin={flash[0]:#x},--defsym=tvmrt_flash_length={flash[1]:#x},"
        f"--defsym=tvmrt_ram_origin={ram[0]:#x},--defsym=tvmrt_ram_length={ram[1]:#x},"
        f"--defsym=tvmrt_stack_bytes={stack_bytes:#x}"
    )
    _run(
        compiler,
        [
            *board.cflags,
            "-nostartfiles",
            "--specs=nano.specs",
            "--specs=nosys.specs",
            "-T",
            str(BOARD_FILES / "cortex_m.ld"),
            "-Wl,--gc-sections",
            f"-Wl,-Map={map_file}",
            f"-Wl,{memory}",
            "-o",
            str(elf),
            *map(str, objects),
            "-lm",
        ],
        shown,
        f"linking the firmware for {board.name}",
    )
    strings = sum(_string_bytes(elf) for elf in elves)
    footprint = read_map(map_file.read_text(errors="replace"), work, strings)
    return Firmware(elf, board, package, workspace, stack_bytes, footprint, compiler)


def _platform_workspace(package: MlfAotPackage) -> int:
    """Bytes of the platform's static workspace: none when the model plans its own pools
    (USMP: static arrays in its code) or its C never calls ``TVMBackendAllocWorkspace``,
    else what metadata.json says its kernels ask for, plus the allocator's rounding."""
    if package.pools:
        return 0
    if package.sources and not any(b"TVMBackendAllocWorkspace" in d for _, d in package.sources):
        return 0
    need = package.workspace_bytes or 0
    return 0 if need <= 0 else ((need + 15) & ~15) + _WORKSPACE_SLACK


def _run(compiler: list[str], args: list[str], shown: str, doing: str) -> None:
    try:
        done = subprocess.run(
            [*compiler, *args],
            capture_output=True,
            text=True,
            timeout=_COMPILE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ModuleLoadError(f"cannot build {shown!r}: {doing} failed: {exc}") from exc
    if done.returncode != 0:
        missing = sorted(set(re.findall(r"undefined reference to `([^']+)'", done.stderr)))
        if missing:
            raise ModuleLoadError(
                f"cannot build {shown!r}: its code calls {', '.join(missing[:8])}"
                f"{', ...' if len(missing) > 8 else ''}, which neither the package nor tvmrt's "
                "micro runtime nor libc defines (TVM's Cortex-M micro-kernels, such as "
                "gemm_*, are C code an llvm build does not export: build the package for "
                "target c)"
            )
        tail = (done.stderr or done.stdout).strip()[-2000:]
        raise ModuleLoadError(
            f"cannot build {shown!r}: {doing} failed ({compiler[0]} exited with "
            f"{done.returncode}): {tail}"
        )


_EM_ARM = 40
_EF_ARM_ABI_FLOAT_HARD = 0x400
_SHT_ARM_ATTRIBUTES = 0x70000003
_TAG_ABI_VFP_ARGS = 28


def _object_entry(package: MlfAotPackage, symbols: set[str]) -> None:
    """The entry of an object-code package: the ``c`` interface's, where its header
    declares one (found by :func:`describe`), else the packed ``tvmgen_<name>_run`` or, as
    TVM's llvm builds of the packed interface define it, ``tvmgen_<name>___tvm_main__``.

    Raises
    ------
    ModuleLoadError
        If the objects define none of them.
    """
    if package.interface == "c" and package.entry in symbols:
        return
    for name in (f"tvmgen_{package.model}_run", f"tvmgen_{package.model}___tvm_main__"):
        if name in symbols:
            package.interface, package.entry = "packed", name
            return
    raise ModuleLoadError(
        f"cannot build {package.shown!r}: its objects define no entry function "
        f"(tvmgen_{package.model}_run or tvmgen_{package.model}___tvm_main__)"
    )


def check_arm_object(data: bytes, name: str, shown: str, board: Board) -> ElfFile:
    """An object of the package links into ``board``'s firmware: 32-bit little-endian Arm
    ELF, relocatable, passing floats as the board does (Arm's build attribute
    ``Tag_ABI_VFP_args``, or the ELF header's hard-float flag where there is none).
    Returns the parsed object.

    Raises
    ------
    ModuleLoadError
        Naming the object and what it is instead.
    """
    what = f"cannot build {shown!r} for {board.name}: its object {name}"
    if len(data) < 52 or data[:4] != b"\x7fELF":
        raise ModuleLoadError(f"{what} is not an ELF object")
    if data[4] != 1 or data[5] != 1:
        raise ModuleLoadError(f"{what} is not 32-bit little-endian (a Cortex-M object is)")
    machine = int.from_bytes(data[18:20], "little")
    kind = int.from_bytes(data[16:18], "little")
    if machine != _EM_ARM or kind != 1:
        raise ModuleLoadError(
            f"{what} is ELF machine {machine}, type {kind}; expected a relocatable Arm "
            "object (machine 40): build the package with llvm -mtriple=thumbv7m-none-eabi "
            "(or thumbv7em-none-eabihf for an FPU board)"
        )
    elf = ElfFile(data, name)
    hard = bool(int.from_bytes(data[36:40], "little") & _EF_ARM_ABI_FLOAT_HARD)
    for section in elf.sections:
        if section.type == _SHT_ARM_ATTRIBUTES:
            vfp = _vfp_args(data[section.offset : section.offset + section.size])
            hard = vfp if vfp is not None else hard
    if hard != board.hard_float:
        raise ModuleLoadError(
            f"{what} uses the {'hard' if hard else 'soft'}-float ABI, {board.name} the "
            f"{'hard' if board.hard_float else 'soft'}-float one; build the package for "
            f"-mcpu={board.cpu}"
            + (" -mfloat-abi=hard" if board.hard_float else " -mfloat-abi=soft")
        )
    return elf


def _string_bytes(elf: ElfFile) -> int:
    """Bytes of an object's ``.rodata`` that are not its constants' symbols (the kernels'
    ``.L.str`` messages and alignment)."""
    rodata = {i: sec.size for i, sec in enumerate(elf.sections) if sec.name == ".rodata"}
    constants = sum(
        s.size
        for s in elf.symbols(dynamic=False)
        if s.section in rodata and s.size and not s.name.startswith(".L.")
    )
    return max(0, sum(rodata.values()) - constants)


def _uleb(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while at < len(data):
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80 or shift > 63:
            break
    return value, at


def _vfp_args(section: bytes) -> bool | None:
    """Whether the ``aeabi`` build attributes say floats pass in VFP registers (None: no
    ``Tag_ABI_VFP_args``). Format: 'A', then (length, vendor name, (tag, length, attributes)+)."""
    if section[:1] != b"A":
        return None
    at = 1
    while at + 4 <= len(section):
        length = int.from_bytes(section[at : at + 4], "little")
        end = min(at + length, len(section))
        vendor_end = section.find(b"\0", at + 4, end)
        if length < 5 or vendor_end < 0:
            return None
        if section[at + 4 : vendor_end] == b"aeabi":
            inner = vendor_end + 1
            while inner + 5 <= end:
                tag, size = section[inner], int.from_bytes(section[inner + 1 : inner + 5], "little")
                stop = min(inner + max(size, 5), end)
                if tag == 1:  # the file's attributes
                    found = _file_attribute(section[inner + 5 : stop], _TAG_ABI_VFP_ARGS)
                    if found is not None:
                        return found == 1
                inner = stop
        at = end
    return None


def _file_attribute(data: bytes, wanted: int) -> int | None:
    at = 0
    while at < len(data):
        tag, at = _uleb(data, at)
        if tag in (4, 5, 67) or (tag > 32 and tag % 2):  # NUL-terminated strings
            end = data.find(b"\0", at)
            at = len(data) if end < 0 else end + 1
            continue
        if tag == 32:  # Tag_compatibility: a number and a string
            _, at = _uleb(data, at)
            end = data.find(b"\0", at)
            at = len(data) if end < 0 else end + 1
            continue
        value, at = _uleb(data, at)
        if tag == wanted:
            return value
    return None


def _c_name(tensor: CrtTensor) -> str:
    return re.sub(r"\W", "_", tensor.name)


def harness_source(package: MlfAotPackage) -> str:
    """The generated ``main.c``: inputs in, one inference, outputs and figures out."""
    lines = [
        "/* generated by tvmrt micro: the board harness of one MLF AOT package */",
        "#include <stdint.h>",
        '#include "semihost.h"',
        '#include "tvm/runtime/c_runtime_api.h"',
        '#include "tvm/runtime/crt/platform.h"',
        "void tvmrt_counter_start(void);",
        "uint64_t tvmrt_counter_ticks(void);",
        "uint32_t tvmrt_stack_used(void);",
    ]
    tensors = [*package.inputs, *package.outputs]
    for i, tensor in enumerate(tensors):
        if package.interface == "graph":  # the plan's own pools (graph_plan.py)
            lines.append(f"#define tvmrt_buf{i} ((uint8_t*)tvmrt_graph_io[{i}])")
        else:
            lines.append(
                f"static uint8_t tvmrt_buf{i}[{max(tensor.size, 1)}] __attribute__((aligned(16)));"
            )
    n_in = len(package.inputs)
    call: list[str]
    if package.interface == "graph":
        lines += ["extern void* const tvmrt_graph_io[];", f"int32_t {GRAPH_ENTRY}(void);"]
        call = ["  tvmrt_counter_start();", f"  int32_t rc = {GRAPH_ENTRY}();"]
    elif package.interface == "c":
        lines.append(f'#include "tvmgen_{package.model}.h"')
        ins = ", ".join(f"(void*)tvmrt_buf{i}" for i in range(n_in)) or "0"
        outs = ", ".join(f"(void*)tvmrt_buf{n_in + i}" for i in range(len(package.outputs)))
        call = [
            f"  struct tvmgen_{package.model}_inputs inputs = {{{ins}}};",
            f"  struct tvmgen_{package.model}_outputs outputs = {{{outs}}};",
            "  tvmrt_counter_start();",
            f"  int32_t rc = {package.entry}(&inputs, &outputs);",
        ]
    else:
        lines.append(
            f"int32_t {package.entry}(TVMValue* args, int* type_codes, int num_args, "
            "TVMValue* out_value, int* out_type_code, void* resource_handle);"
        )
        for i, tensor in enumerate(tensors):
            lines.append(c_shape(f"tvmrt_shape{i}", tensor.shape, const=False))
        call = [f"  DLTensor tensors[{len(tensors)}];", f"  TVMValue args[{len(tensors)}];"]
        call.append(f"  int codes[{len(tensors)}];")
        for i, tensor in enumerate(tensors):
            dltensor = c_dltensor(
                f"tvmrt_buf{i}", len(tensor.shape), DataType(tensor.dtype), f"tvmrt_shape{i}"
            )
            call += [
                f"  tensors[{i}] = (DLTensor){dltensor};",
                f"  args[{i}].v_handle = &tensors[{i}];",
                f"  codes[{i}] = kTVMDLTensorHandle;",
            ]
        call += [
            "  TVMValue ret;",
            "  int ret_code = 0;",
            "  tvmrt_counter_start();",
            f"  int32_t rc = {package.entry}(args, codes, {len(tensors)}, &ret, &ret_code, 0);",
        ]
    lines += [
        "int main(void) {",
        "  TVMPlatformInitialize();",
        '  int in = tvmrt_sh_open_read("tvmrt-inputs.bin");',
        "  if (in < 0) {",
        '    tvmrt_sh_write0("tvmrt-micro: cannot open tvmrt-inputs.bin\\n");',
        "    return 2;",
        "  }",
    ]
    for i, tensor in enumerate(package.inputs):
        lines += [
            f"  if (tvmrt_sh_read(in, tvmrt_buf{i}, {tensor.size}) != 0) {{",
            f'    tvmrt_sh_write0("tvmrt-micro: short input {_c_name(tensor)}\\n");',
            "    return 2;",
            "  }",
        ]
    lines += ["  tvmrt_sh_close(in);", *call, "  uint64_t ticks = tvmrt_counter_ticks();"]
    lines += [
        '  tvmrt_sh_write_u32("tvmrt-micro: rc=", (uint32_t)rc);',
        '  tvmrt_sh_write_u32("tvmrt-micro: ticks_hi=", (uint32_t)(ticks >> 32));',
        '  tvmrt_sh_write_u32("tvmrt-micro: ticks_lo=", (uint32_t)ticks);',
        '  tvmrt_sh_write_u32("tvmrt-micro: stack_used=", tvmrt_stack_used());',
        "  if (rc != 0) {",
        '    tvmrt_sh_write0("tvmrt-micro: last error: ");',
        "    tvmrt_sh_write0(TVMGetLastError());",
        '    tvmrt_sh_write0("\\n");',
        "    return 1;",
        "  }",
        '  int out = tvmrt_sh_open_write("tvmrt-outputs.bin");',
        "  if (out < 0) return 2;",
    ]
    for i, tensor in enumerate(package.outputs):
        lines.append(
            f"  if (tvmrt_sh_write(out, tvmrt_buf{n_in + i}, {tensor.size}) != 0) return 2;"
        )
    lines += ["  tvmrt_sh_close(out);", "  return 0;", "}", ""]
    return "\n".join(lines)
