"""Reading and writing the files TVM makes, byte by byte: nothing is loaded or run.

The toolkit beneath the runtime: it imports nothing of tvmrt but :mod:`tvmrt.error`, so the
loaders, ``tvmrt inspect`` and the fuzz targets use it alike (tests/runtime/test_layers.py
keeps it so).

* :mod:`.headers`: what a file is from its header (ELF, PE, Mach-O, archives, params, text)
  and whether it is built for this machine;
* :mod:`.binary`: ELF sections and symbol tables (re-exports :mod:`.headers`);
* :mod:`.abi`: what the symbols mean for TVM (ABI, context slots, system-lib, link-params,
  the blob symbol);
* :mod:`.elf_checks`: everything ``ld.so`` trusts, checked before ``dlopen``, over
  :mod:`.elf_load` (program headers, segments), :mod:`.elf_dynamic` (the dynamic section),
  :mod:`.elf_tables` and :mod:`.elf_symbols` (relocation, symbol and hash tables);
* :mod:`.archive`: ``export_library`` tar archives, every member in memory within bounds;
* :mod:`.files`: opening a model's files: regular files only, each kind's size bound
  checked before it is read;
* :mod:`.stream`: dmlc streams, TVM's binary serialisation (params, blobs, executables).

Nothing is imported here: ``import tvmrt.binfmt`` costs nothing until a module is named.
"""
