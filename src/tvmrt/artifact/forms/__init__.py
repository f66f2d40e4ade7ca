"""The artifact forms, in one table that loading and inspection both read.

=========  ==============================================  =====================
form       what it is                                      file
=========  ==============================================  =====================
folder     graph JSON + kernel library (+ params), or      :mod:`.folder`
           explicit ``--graph/--lib/--params``
mlf        Model Library Format tar                        :mod:`.mlf`
mlf_aot    Model Library Format AOT package (tar or        :mod:`.mlf_aot`
           unpacked folder): C code compiled for the host
tvmc       tvmc package                                    :mod:`.tvmc`
aot        AOT executor build (``get_c_metadata``)         :mod:`.aot`
relax      Relax VM executable (``relax.build`` /          :mod:`.relax`
           ``tvm.compile``, ``export_library``: one
           ``model.so``, or a folder holding one)
relay_vm   Relay VM ``code.ro`` + ``lib.so`` (``vm.so``:   :mod:`.relay_vm`
           handed over by the factory form)
factory    graph executor factory library (.so/.o/.tar),   :mod:`.factory`
           and any library file no other form claims
=========  ==============================================  =====================

The library file is sniffed once by the loader's own dispatcher
(:func:`tvmrt.runtime.loaders.dispatch.sniff`: header, symbols, archive member names;
nothing is loaded); the first form in :data:`FORMS` that claims the files is the form.
Adding a form is one new file here and one entry in :data:`FORMS`.
"""

from __future__ import annotations

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.forms import aot, factory, folder, mlf, mlf_aot, relax, relay_vm, tvmc
from tvmrt.artifact.forms.base import ArtifactForm, LoadRequest
from tvmrt.error import InternalError, TVMError
from tvmrt.runtime.loaders.dispatch import Sniffed, sniff

__all__ = ["FORMS", "ArtifactForm", "LoadRequest", "form_of"]

FORMS: tuple[ArtifactForm, ...] = (
    relax.FORM,  # before folder: a Relax executable takes no graph JSON from its folder
    relay_vm.FORM,
    folder.FORM,
    mlf.FORM,
    mlf_aot.FORM,
    tvmc.FORM,
    aot.FORM,
    factory.FORM,
)


def form_of(files: ArtifactFiles) -> tuple[ArtifactForm, Sniffed | None, str | None]:
    """The form of ``files``, what the dispatcher sniffed from the library, and why it
    could not sniff it (None if it could).
    """
    sniffed: Sniffed | None = None
    problem: str | None = None
    try:
        sniffed = sniff(str(files.lib))
    except (TVMError, OSError) as exc:  # corrupt ELF or tar: loading says so again
        problem = str(exc)
    for form in FORMS:
        if form.claims(files, sniffed):
            return form, sniffed, problem
    raise InternalError("no artifact form claimed the files; the factory form claims all")
