"""``dlr.api``: ``DLRModel``, DLR 1.10's entry class, with its exact signatures.

``DLRModel(model_path, dev_type=None, dev_id=None, error_log_file=None,
use_default_dlr=False)`` loads a Neo model folder (``dev_type`` ``'cpu'``, ``'gpu'`` or
``'opencl'``; default ``'cpu'``, 0) through :class:`~tvmrt.dlr.dlr_model.DLRModelImpl`;
every method forwards to it and, as DLR does, logs a failure (to ``error_log_file`` if
given) before raising it. No telemetry: DLR's ``call_phone_home`` has no counterpart.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from tvmrt.dlr.dlr_model import DLRModelImpl, IDLRModel

__all__ = ["DLRModel", "IDLRModel"]


def _logger(log_file: str | None) -> logging.Logger:
    logger = logging.getLogger("tvmrt.dlr")
    if log_file is not None and not any(
        isinstance(h, logging.FileHandler) and h.baseFilename == log_file for h in logger.handlers
    ):
        logger.addHandler(logging.FileHandler(log_file))
    return logger


class DLRModel(IDLRModel):
    """Load a Neo-compiled model (DLR's ``dlr.DLRModel``).

    Examples
    --------
    >>> # from tvmrt import dlr        # instead of: import dlr
    >>> # model = dlr.DLRModel("resnet50_neo", "cpu", 0)
    >>> # probabilities = model.run({"data": image})[0]
    """

    def __init__(
        self,
        model_path: str,
        dev_type: str | None = None,
        dev_id: int | None = None,
        error_log_file: str | None = None,
        use_default_dlr: bool = False,
    ) -> None:
        self.neo_logger = _logger(error_log_file)
        try:
            self._impl = DLRModelImpl(
                model_path,
                "cpu" if dev_type is None else dev_type,
                0 if dev_id is None else dev_id,
                error_log_file,
                use_default_dlr,
            )
        except Exception as ex:
            self.neo_logger.error("error in DLRModel instantiation %s", ex)
            raise

    def _call(self, what: str, method: str, *args: Any) -> Any:
        try:
            return getattr(self._impl, method)(*args)
        except Exception as ex:
            self.neo_logger.error("error in %s %s %s", what, type(self._impl).__name__, ex)
            raise

    def run(self, input_values: Any) -> list[np.ndarray[Any, Any]]:
        """Run inference; returns a list of arrays (one per output)."""
        out: list[np.ndarray[Any, Any]] = self._call("running inference", "run", input_values)
        return out

    def get_input_names(self) -> list[str]:
        return list(self._call("getting input names", "get_input_names"))

    def get_input(self, name: str, shape: Any = None) -> np.ndarray[Any, Any]:
        value: np.ndarray[Any, Any] = self._call("getting inputs", "get_input", name, shape)
        return value

    def get_output_names(self) -> list[str]:
        return list(self._call("getting output names", "get_output_names"))

    def get_version(self) -> str:
        return str(self._call("getting version", "get_version"))

    def has_metadata(self) -> bool:
        return bool(self._call("checking for metadata file", "has_metadata"))

    def get_input_dtypes(self) -> list[str]:
        return list(self._call("getting input data types", "get_input_dtypes"))

    def get_output_dtypes(self) -> list[str]:
        return list(self._call("getting output data types", "get_output_dtypes"))

    def get_input_name(self, index: int) -> str:
        return str(self._call("getting input name", "get_input_name", index))

    def get_output_name(self, index: int) -> str:
        return str(self._call("getting output name", "get_output_name", index))

    def get_input_dtype(self, index: int) -> str:
        return str(self._call("getting input data type", "get_input_dtype", index))

    def get_output_dtype(self, index: int) -> str:
        return str(self._call("getting output data type", "get_output_dtype", index))
