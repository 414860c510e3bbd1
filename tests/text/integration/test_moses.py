"""The cached Moses run (FastMoses) gives exactly sacremoses' output (the reference): the tests
that start processes, Ray or a browser, read the shared data or run long (the integration tier,
tests/README.md); the rest are in :mod:`tests.text.test_moses`."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest

from tests.text.test_moses import FAST


@pytest.mark.data
def test_real_text(shared_data: Path) -> None:
    """Document lines, and both sides of the de-en corpus, every 100th line."""
    en, de = FAST["en"], FAST["de"]
    n = 0
    with gzip.open(shared_data / "clir" / "docs.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in itertools.islice(f, 0, 16455, 330):
            for text in json.loads(line)["text"].split("\n")[:60]:
                assert en.tokenize(text) == en.reference(text), text
                n += 1
    with gzip.open(shared_data / "parallel" / "de-en.tsv.gz", "rt", encoding="utf-8") as f:
        for line in itertools.islice(f, 0, None, 100):
            _, foreign, english = line.rstrip("\n").split("\t")
            assert en.tokenize(english) == en.reference(english), english
            assert de.tokenize(foreign) == de.reference(foreign), foreign
            n += 1
    assert n > 6000
