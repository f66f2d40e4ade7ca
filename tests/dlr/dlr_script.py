"""A DLR user's script, as DLR's documentation writes them (run by tests/dlr/test_dlr_script.py).

usage: python dlr_script.py MODEL_DIR INPUTS.npz OUTPUTS.npz
"""

from __future__ import annotations

import sys

import numpy as np

import dlr


def main():
    model_dir, inputs_file, outputs_file = sys.argv[1:4]
    model = dlr.DLRModel(model_dir, "cpu", 0)
    inputs = dict(np.load(inputs_file))
    names = model.get_input_names()
    if len(names) == 1:
        outputs = model.run(inputs[names[0]])
    else:
        outputs = model.run({name: inputs[name] for name in names})
    labels = model.get_output_names() or [f"output_{i}" for i in range(len(outputs))]
    np.savez(outputs_file, **dict(zip(labels, outputs, strict=True)))
    print(dlr.__version__, model.get_version(), ",".join(labels))


if __name__ == "__main__":
    main()
