"""Train a small digits classifier and export it as an ONNX model.

scikit-learn's bundled 8x8 digits (1,797 images, no download) are split into a training
and a held-out set. An MLP (64 → 64 → 10) is trained with scikit-learn, and its weights
are written into an ONNX graph (Gemm, Relu, Gemm, Softmax) with ``onnx.helper``, so no
converter package is needed. The held-out images and labels are saved next to it.

    python examples/digits/train.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

HIDDEN = 64


def flush(w: np.ndarray) -> np.ndarray:
    """``w`` with its subnormal values set to zero."""
    return np.where(np.abs(w) < np.finfo(w.dtype).tiny, np.zeros_like(w), w)


def train(out_dir: Path) -> tuple[Path, Path]:
    """Train, export ``digits.onnx`` and ``heldout.npz``; returns both paths."""
    digits = load_digits()
    images = (digits.data / 16.0).astype("float32")  # pixel values 0..16 → 0..1
    x_train, x_test, y_train, y_test = train_test_split(
        images, digits.target, test_size=0.2, random_state=0, stratify=digits.target
    )
    clf = MLPClassifier(hidden_layer_sizes=(HIDDEN,), max_iter=400, random_state=0)
    clf.fit(x_train, y_train)
    accuracy = clf.score(x_test, y_test)
    print(f"trained MLP 64-{HIDDEN}-10: scikit-learn held-out accuracy {accuracy:.4f}")

    batch = len(x_test)
    # weights of pixels that are blank in every training digit decay towards zero and land
    # below float32's smallest normal: zeroed, or every matmul runs on slow subnormal
    # arithmetic (flush_subnormals.py did this to the committed model)
    w1, w2 = (flush(w.astype("float32")) for w in clf.coefs_)
    b1, b2 = (flush(b.astype("float32")) for b in clf.intercepts_)
    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["image", "w1", "b1"], ["hidden"]),
            helper.make_node("Relu", ["hidden"], ["hidden_relu"]),
            helper.make_node("Gemm", ["hidden_relu", "w2", "b2"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
        ],
        "digits_mlp",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [batch, 64])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [batch, 10])],
        initializer=[
            numpy_helper.from_array(w1, "w1"),
            numpy_helper.from_array(b1, "b1"),
            numpy_helper.from_array(w2, "w2"),
            numpy_helper.from_array(b2, "b2"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by every onnxruntime since 1.10
    onnx.checker.check_model(model)
    out_dir.mkdir(parents=True, exist_ok=True)
    model_path = out_dir / "digits.onnx"
    onnx.save(model, model_path)
    data_path = out_dir / "heldout.npz"
    np.savez(data_path, image=x_test, label=y_test.astype("int64"))
    print(f"wrote {model_path} and {data_path} ({batch} held-out digits)")
    return model_path, data_path


if __name__ == "__main__":
    train(Path(sys.argv[1] if len(sys.argv) > 1 else "build/digits"))
