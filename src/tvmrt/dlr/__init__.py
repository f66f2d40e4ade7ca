"""DLR 1.10's Python API (``import dlr``) over tvmrt: SageMaker Neo models without DLR.

``from tvmrt import dlr`` (or ``import tvmrt.dlr as dlr``) gives ``dlr.DLRModel`` with DLR
1.10's signatures and behaviour (:mod:`.api`, :mod:`.dlr_model`): a Neo model folder
(``compiled.so``, ``compiled_model.json``, ``compiled.params``, ``compiled.meta``; or a
Relay VM's ``code.ro`` + ``compiled.so`` + ``compiled.meta``) runs on tvmrt's graph
executor or Relay VM. The ``libdlr.so`` a Neo folder ships is never loaded, and nothing
is sent anywhere.

To leave a script's ``import dlr`` unchanged, opt in: ``python -m tvmrt.dlr script.py
ARGS`` runs it with ``dlr`` resolving here, and :func:`install` does the same inside a
process. Neither shadows a real ``dlr`` the user installed: if ``import dlr`` finds one,
it is what scripts get (``install`` returns False).
"""

from __future__ import annotations

import importlib.util
import sys

from tvmrt.dlr.api import DLRModel
from tvmrt.dlr.metadata import VERSION

__all__ = ["DLRModel", "install"]
__version__ = VERSION

_SUBMODULES = ("api", "dlr_model", "metadata")


def install() -> bool:
    """Make ``import dlr`` (and ``dlr.api``, ``dlr.dlr_model``, ``dlr.metadata``) resolve
    to this module, unless a real ``dlr`` is installed; returns whether it did."""
    current = sys.modules.get("dlr")
    if current is sys.modules[__name__]:
        return True
    if current is not None or importlib.util.find_spec("dlr") is not None:
        return False  # the user's own DLR wins
    sys.modules["dlr"] = sys.modules[__name__]
    for name in _SUBMODULES:
        sys.modules[f"dlr.{name}"] = importlib.import_module(f"{__name__}.{name}")
    return True
