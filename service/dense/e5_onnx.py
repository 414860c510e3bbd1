"""The E5 encoder's forward pass as an ONNX graph, run by ONNX Runtime: the fast engine beside
the NumPy reference in :mod:`service.dense.e5`.

The graph is built here, in memory, from the weights :class:`~service.dense.e5.E5Model` read
(nothing is downloaded or written): the 12 post-LayerNorm layers of Devlin et al. 2019 (§3) as
standard ONNX operators (MatMul, Softmax, Gelu, LayerNormalization), which ONNX Runtime's
graph optimiser fuses and runs with its own GEMM kernels. Its input is the embedding layer's
output (the word rows are gathered from the 4-bit table in NumPy: a float32 copy of the
250,002 × 384 table would be 384 MB) and the attention mask as an additive bias; its output is
the last layer's hidden states, which :meth:`E5Model.embed` pools.

``int8``: every weight matrix is quantised per output column to 8 bits (symmetric) and each
product's input per token, when it is computed (symmetric, max |x| / 127; ``MatMulInteger``:
ONNX Runtime's integer kernels use the CPU's VNNI instructions where it has them). One scale
for a whole batch (``DynamicQuantizeLinear``) was tried first: its vectors came to a cosine
of .994 with the float32 ones and lost short-query MAP; per token they come to .999.
``bench/bench_encoder.py`` measures both speed and quality.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from service.dense.e5 import E5Model, Float32Array
from service.errors import ConfigurationError


def _onnx() -> tuple[Any, Any]:
    try:
        import onnx
        import onnxruntime
    except ImportError as exc:  # both are dependencies of the service
        raise ConfigurationError(
            f"the e5-onnx encoder needs onnx and onnxruntime ({exc}); reinstall with `make install`"
        ) from exc
    return onnx, onnxruntime


class _GraphBuilder:
    def __init__(self, onnx: Any) -> None:
        self.onnx = onnx
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(self.onnx.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op: str, *inputs: str, outputs: int = 1, **attrs: Any) -> Any:
        self._n += 1
        names = [f"{op.lower()}_{self._n}_{i}" for i in range(outputs)]
        self.nodes.append(self.onnx.helper.make_node(op, list(inputs), names, **attrs))
        return names[0] if outputs == 1 else names

    def linear(self, x: str, weight: Float32Array, bias: np.ndarray, name: str, int8: bool) -> str:
        """``x @ weight.T + bias`` (``weight``: out × in, as the weight file stores it)."""
        if not int8:
            return str(self.op("Add", self.op("MatMul", x, self.const(name + ".w", weight.T)),
                               self.const(name + ".b", np.asarray(bias, np.float32))))  # fmt: skip
        w = weight.T.astype(np.float32)  # in × out, one scale per output column
        k, m = w.shape
        w_scale = np.maximum(np.abs(w).max(axis=0), 1e-12) / 127.0
        codes = np.clip(np.rint(w / w_scale), -127, 127).astype(np.int8)
        c = {key: self.const(f"{name}.{key}", value) for key, value in {
            "flat": np.array([-1, k], np.int64), "rows": np.array([1], np.int64),
            "127": np.array(127.0, np.float32), "eps": np.array(1e-12, np.float32),
            "128": np.array(128.0, np.float32), "zp": np.array(128, np.uint8),
            "q": codes, "s": w_scale.astype(np.float32), "b": np.asarray(bias, np.float32),
            "lead": np.array([0], np.int64), "last": np.array([-1], np.int64),
            "m": np.array([m], np.int64),
        }.items()}  # fmt: skip
        # one scale per token (row): max |x| / 127, the codes shifted by 128 into uint8 so
        # that one scalar zero point serves every row (ONNX Runtime's fast u8 × s8 path)
        x2 = self.op("Reshape", x, c["flat"])
        amax = self.op("ReduceMax", self.op("Abs", x2), c["rows"], keepdims=1)
        x_scale = self.op("Max", self.op("Div", amax, c["127"]), c["eps"])
        shifted = self.op("Add", self.op("Round", self.op("Div", x2, x_scale)), c["128"])
        xq = self.op("Cast", shifted, to=self.onnx.TensorProto.UINT8)
        prod = self.op("Cast", self.op("MatMulInteger", xq, c["q"], c["zp"]),
                       to=self.onnx.TensorProto.FLOAT)  # fmt: skip
        out = self.op("Add", self.op("Mul", self.op("Mul", prod, x_scale), c["s"]), c["b"])
        lead = self.op("Slice", self.op("Shape", x), c["lead"], c["last"])
        return str(self.op("Reshape", out, self.op("Concat", lead, c["m"], axis=0)))


def build_graph(model: E5Model, *, int8: bool = False) -> bytes:
    """The serialised ONNX model of ``model``'s encoder layers (inputs ``x0``: B × L × H
    embeddings, ``mask``: B × 1 × 1 × L additive bias; output ``hidden``: B × L × H)."""
    onnx, _ = _onnx()
    g = _GraphBuilder(onnx)
    H, NH = model.H, model.n_heads
    hd = H // NH
    split_heads = g.const("split_heads", np.array([0, 0, 3, NH, hd], np.int64))
    merge_heads = g.const("merge_heads", np.array([0, 0, H], np.int64))
    scale = g.const("scale", np.array(1.0 / np.sqrt(hd), np.float32))
    axis0 = g.const("axis0", np.array([0], np.int64))

    def layernorm(x: str, wb: tuple[Float32Array, Float32Array], name: str) -> str:
        w, b = (
            g.const(f"{name}.{k}", np.asarray(v, np.float32)) for k, v in zip("wb", wb, strict=True)
        )
        return str(g.op("LayerNormalization", x, w, b, axis=-1, epsilon=model.eps))

    x = layernorm("x0", model.ln0, "emb.ln")
    for i in range(model.n_layers):
        ly = model.layer(i)
        p = f"l{i}"
        qkv = g.linear(x, ly.qkv, ly.qkv_b, p + ".qkv", int8)
        heads = g.op("Transpose", g.op("Reshape", qkv, split_heads), perm=[2, 0, 3, 1, 4])
        q, k, v = (
            g.op("Squeeze", part, axis0)
            for part in g.op("Split", heads, outputs=3, axis=0, num_outputs=3)
        )
        scores = g.op(
            "Add",
            g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])), scale),
            "mask",
        )
        ctx = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        ctx = g.op("Reshape", g.op("Transpose", ctx, perm=[0, 2, 1, 3]), merge_heads)
        x = layernorm(
            g.op("Add", x, g.linear(ctx, ly.out, ly.out_b, p + ".out", int8)), ly.ln1, p + ".ln1"
        )
        mid = g.op("Gelu", g.linear(x, ly.up, ly.up_b, p + ".up", int8))
        x = layernorm(
            g.op("Add", x, g.linear(mid, ly.down, ly.down_b, p + ".down", int8)), ly.ln2, p + ".ln2"
        )
    g.nodes.append(onnx.helper.make_node("Identity", [x], ["hidden"]))
    f = onnx.TensorProto.FLOAT
    graph = onnx.helper.make_graph(
        g.nodes,
        "e5",
        [onnx.helper.make_tensor_value_info("x0", f, ["B", "L", H]),
         onnx.helper.make_tensor_value_info("mask", f, ["B", 1, 1, "L"])],
        [onnx.helper.make_tensor_value_info("hidden", f, ["B", "L", H])],
        initializer=g.inits,
    )  # fmt: skip
    proto = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 20)])
    onnx.checker.check_model(proto)
    data: bytes = proto.SerializeToString()
    return data


class OnnxRunner:
    """Runs :func:`build_graph`'s model: ``run(x0, valid)`` → hidden states, the same contract
    as :meth:`E5Model.layers_reference`. ``threads``: ONNX Runtime's intra-op threads (0: one
    per core); its threads wait passively, so a busy machine's other work keeps the cores."""

    def __init__(self, model: E5Model, *, int8: bool = False, threads: int = 0) -> None:
        _, ort = _onnx()
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = max(threads, 0)
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            build_graph(model, int8=int8), options, providers=["CPUExecutionProvider"]
        )

    def __call__(self, x0: Float32Array, valid: np.ndarray) -> Float32Array:
        mask = np.where(valid, 0.0, -1e9).astype(np.float32)[:, None, None, :]
        out: Float32Array = self._session.run(["hidden"], {"x0": x0, "mask": mask})[0]
        return out
