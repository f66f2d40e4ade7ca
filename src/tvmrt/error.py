"""Errors raised by tvmrt.

Every error tvmrt raises on purpose derives from :class:`TVMError`, which is a
``RuntimeError`` like TVM's own. Each subclass also derives from the builtin that
plain Python code would catch, so ``except ValueError`` keeps working::

    TVMError (RuntimeError)
    ├── InternalError                            a check of TVM's runtime failed (TVM's ICHECK)
    │   └── FunctionAlreadyRegisteredError (ValueError)  register_func of a taken name
    ├── GraphFormatError (ValueError)            graph JSON is malformed or inconsistent
    ├── ParamsFormatError (ValueError)           params blob: bad magic, truncated, bad dtype
    ├── ReportFormatError (ValueError)           profiling report JSON is malformed
    ├── DataTypeError (ValueError)               a dtype string or code tvmrt does not know
    ├── InvalidArgumentError (ValueError)        an argument's value is out of range
    ├── ArgumentTypeError (TypeError)            an argument has the wrong Python type
    ├── ReadOnlyError (AttributeError)           assigning to an immutable value (a DataType)
    ├── UnsupportedError (NotImplementedError)   a TVM API tvmrt has no equivalent for here
    ├── ArrayError (ValueError)                  an array has the wrong shape, dtype, device,
    │                                            alignment or layout for where it is used
    ├── FunctionNotFoundError (AttributeError)   a module or the registry lacks a function
    │   └── GlobalFunctionNotFoundError (ValueError)  get_global_func of an unknown name
    ├── NodeNotFoundError (AttributeError)       the debug executor has no node by that name
    ├── ArtifactNotFoundError (FileNotFoundError)  an artifact, its file or a model file is missing
    ├── InputNotFoundError (LookupError)         an executor has no input or output by that key
    │   └── InputIndexError (IndexError)         an input or output index is out of range
    ├── ModuleLoadError (OSError)                a file is not a loadable TVM module here
    │   └── ModuleFileNotFoundError (FileNotFoundError, ValueError)  no such module file
    ├── DeviceUnavailableError                   no backend for a device, or no such device
    ├── DeviceOutOfMemoryError (MemoryError)     an allocation failed on a device
    ├── KernelError                              a compiled kernel returned an error status
    ├── CompileError (ValueError)                tvmrt.compile cannot turn a model into a
    │   │                                        graph-executor artifact
    │   └── InputShapeRequiredError              an input has symbolic dimensions: give
    │                                            input_shapes / --input-shape
    ├── UsageError (ValueError)                  a command-line argument or input file is
    │                                            unusable (the tvmrt command exits with 2)
    ├── DLRError                                 tvmrt.dlr: what DLR's C API would report
    └── RPCError                                 a remote session failed (TVM's RPCError)
        ├── RPCProtocolError (ValueError)        a peer sent bytes that break TVM's RPC protocol
        └── RPCSessionTimeoutError (TimeoutError)  a remote session ran past its timeout
"""

from __future__ import annotations

__all__ = [
    "TVMError",
    "DLRError",
    "InternalError",
    "FunctionAlreadyRegisteredError",
    "ReadOnlyError",
    "InvalidArgumentError",
    "ArgumentTypeError",
    "UnsupportedError",
    "GraphFormatError",
    "ParamsFormatError",
    "ReportFormatError",
    "DataTypeError",
    "ArrayError",
    "FunctionNotFoundError",
    "GlobalFunctionNotFoundError",
    "NodeNotFoundError",
    "ArtifactNotFoundError",
    "InputNotFoundError",
    "InputIndexError",
    "IndexOutOfRangeError",
    "ModuleLoadError",
    "ModuleFileNotFoundError",
    "DeviceUnavailableError",
    "DeviceOutOfMemoryError",
    "KernelError",
    "CompileError",
    "InputShapeRequiredError",
    "UsageError",
    "RPCError",
    "RPCProtocolError",
    "RPCSessionTimeoutError",
    "add_note",
]


class TVMError(RuntimeError):
    """Base class of every error tvmrt raises on purpose."""


class InternalError(TVMError):
    """A consistency check of the runtime failed (what TVM reports as ``InternalError``)."""


class FunctionAlreadyRegisteredError(InternalError, ValueError):
    """``register_func`` of a name that is taken, without ``override=True``.

    TVM v0.19 fails an ICHECK here (``tvm.error.InternalError``); tvmrt <= 0.1 raised a
    plain ``ValueError``, so this class is both.
    """


class GraphFormatError(TVMError, ValueError):
    """The graph JSON misses a field, has a value of the wrong type, or is inconsistent."""


class ParamsFormatError(TVMError, ValueError):
    """A params blob or tensor record is malformed: bad magic, truncated, or bad dtype."""


class ReportFormatError(TVMError, ValueError):
    """A profiling report's JSON is malformed or has a metric of an unknown type."""


class DataTypeError(TVMError, ValueError):
    """A dtype string or (code, bits, lanes) triple that tvmrt cannot represent."""


class InvalidArgumentError(TVMError, ValueError):
    """An argument's value is out of range (``number=0``, an empty device list)."""


class ArgumentTypeError(TVMError, TypeError):
    """An argument has the wrong Python type (a name that is not a ``str``)."""


class ReadOnlyError(TVMError, AttributeError):
    """An attribute of an immutable value was assigned (``DataType`` fields are shared)."""


class UnsupportedError(TVMError, NotImplementedError):
    """A TVM API that tvmrt does not provide for this object or on this machine."""


class ArrayError(TVMError, ValueError):
    """An array does not fit where it is used (shape, dtype, device, alignment, layout)."""


class FunctionNotFoundError(TVMError, AttributeError):
    """A module or the global registry has no function with the requested name."""


class GlobalFunctionNotFoundError(FunctionNotFoundError, ValueError):
    """``get_global_func`` of a name nobody registered (TVM v0.19 raised ``ValueError``)."""


class NodeNotFoundError(TVMError, AttributeError):
    """The debug executor has no node by that name (TVM raised AttributeError)."""


class ArtifactNotFoundError(TVMError, FileNotFoundError):
    """An artifact, one of its files, or a model file does not exist."""


class InputNotFoundError(TVMError, LookupError):
    """An executor has no input or output with the requested name or index."""

    def __str__(self) -> str:
        # LookupError would not quote, but KeyError would: keep the plain message either way.
        return str(self.args[0]) if self.args else ""


class InputIndexError(InputNotFoundError, IndexError):
    """An input or output index is out of range (also an ``IndexError``)."""


class IndexOutOfRangeError(TVMError, IndexError):
    """An index or length past the end of a runtime object (also an ``IndexError``)."""


class ModuleLoadError(TVMError, OSError):
    """A file cannot be loaded as a TVM module on this machine (format, platform, linker)."""


class ModuleFileNotFoundError(ModuleLoadError, FileNotFoundError, ValueError):
    """``load_module`` was given a path with no file (TVM raised ``ValueError`` here)."""


class DeviceUnavailableError(TVMError):
    """No backend is available for a device type, or the device does not exist."""


class DeviceOutOfMemoryError(TVMError, MemoryError):
    """Allocating memory on a device failed."""


class KernelError(TVMError):
    """A compiled kernel reported failure; the message is the kernel's own."""


class CompileError(TVMError, ValueError):
    """``tvmrt.compile`` cannot turn a model into a graph-executor artifact.

    The model uses something a static graph cannot express (symbolic shapes, control flow,
    packed-function calls), the frontend rejects an operator, or a build step failed.
    """


class InputShapeRequiredError(CompileError):
    """A model input has symbolic (or unknown) dimensions and no static shape was given.

    A usage problem, not a model failure: ``input_shapes`` (CLI ``--input-shape``) fixes it.
    """


class UsageError(TVMError, ValueError):
    """A command-line argument or input file is unusable: one line, exit status 2.

    Raised by the ``tvmrt`` command's verbs (the compiler's ``compile`` verb included).
    """


class DLRError(TVMError):
    """DLR's ``dlr.dlr_model.DLRError`` (``tvmrt.dlr``): what DLR's C API reports failing."""


class RPCError(TVMError):
    """A remote (RPC) session failed: the peer raised, refused, or went away."""


class RPCProtocolError(RPCError, ValueError):
    """A peer sent bytes that break TVM's RPC or tracker protocol (bad magic, lying length,
    unknown code, a handle that was never issued)."""


class RPCSessionTimeoutError(RPCError, TimeoutError):
    """A remote session ran past the timeout its client asked for (TVM's name)."""


def add_note(exc: BaseException, note: str) -> None:
    """Attach context to ``exc`` without changing its type (``BaseException.add_note``)."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:  # Python 3.10: emulate PEP 678 so tracebacks from 3.11+ tooling still show it
        notes = list(getattr(exc, "__notes__", ()))
        notes.append(note)
        exc.__notes__ = notes  # type: ignore[attr-defined]
