"""Corpus cleaning: counts per rule on a hand-made corpus; sane invariants on real data."""

from __future__ import annotations

import json
import re

import pytest

from service.errors import ConfigurationError
from service.records import ParallelPair
from service.text.clean import CorpusCleaner, TokenizedPair, clean_parallel


def _corpus() -> list[ParallelPair]:
    return [
        ParallelPair("t:1", "Datei _öffnen", "_Open file"),  # kept, accelerators
        ParallelPair("t:2", "%s", "%s"),  # empty after normalisation
        ParallelPair("t:3", "<b>Fett</b>", "<b>Bold</b>"),  # kept, tags
        ParallelPair("t:4", " ".join(["Wort"] * 81), " ".join(["word"] * 81)),  # too long
        ParallelPair("t:5", "Ja", " ".join(["yes"] * 10)),  # ratio 10 > 9
        ParallelPair("t:6", "Ja", " ".join(["yes"] * 9)),  # ratio 9: kept
        ParallelPair("t:7", "Tom &amp; Jerry", "Tom &amp; Jerry"),  # kept, entities
        ParallelPair("t:8", "{0} Dateien", "{0} files"),  # kept, brace placeholders
        ParallelPair("t:9", "   ", "Hello"),  # empty source
        ParallelPair("t:10", " ".join(["Wort"] * 80), " ".join(["word"] * 80)),  # 80: kept
    ]


def test_hand_made_corpus() -> None:
    kept_iter, report = clean_parallel(_corpus(), "de", "en")
    assert not report.complete
    kept = list(kept_iter)
    assert report.complete
    assert [p.origin for p in kept] == ["t:1", "t:3", "t:6", "t:7", "t:8", "t:10"]
    assert kept[0] == TokenizedPair("t:1", ("datei", "öffnen"), ("open", "file"))
    assert kept[1] == TokenizedPair("t:3", ("fett",), ("bold",))
    assert kept[3] == TokenizedPair("t:7", ("tom", "&", "jerry"), ("tom", "&", "jerry"))
    assert kept[4] == TokenizedPair("t:8", ("dateien",), ("files",))
    assert report.pairs_in == 10
    assert report.pairs_kept == 6
    assert report.removed == {"empty": 2, "too_long": 1, "length_ratio": 1}
    assert report.consistent()
    assert (report.source_tokens, report.target_tokens) == (
        2 + 1 + 1 + 3 + 1 + 80,
        2 + 1 + 9 + 3 + 1 + 80,
    )
    expected_counts = {
        "control": 0,
        "printf": 1,
        "brace": 1,
        "variable": 0,
        "tag": 2,
        "entity": 1,
        "accelerator": 1,
        "escape": 0,
    }
    assert report.source_normalised.to_dict() == expected_counts
    assert report.target_normalised.to_dict() == expected_counts


def test_limits_are_parameters() -> None:
    kept, report = clean_parallel(_corpus(), "de", max_tokens=2, max_ratio=1.0)
    # kept: t:1 (2/2 tokens), t:3 (1/1), t:8 (1/1); t:7 has 3 tokens per side
    assert [p.origin for p in kept] == ["t:1", "t:3", "t:8"]
    # too_long is checked before the ratio: t:4, t:5, t:6, t:7, t:10
    assert report.removed == {"empty": 2, "too_long": 5, "length_ratio": 0}
    kept, report = clean_parallel(_corpus(), "de", max_ratio=2.0)
    assert [p.origin for p in kept] == ["t:1", "t:3", "t:7", "t:8", "t:10"]
    assert report.removed == {"empty": 2, "too_long": 1, "length_ratio": 2}


def test_report_prints_and_serialises() -> None:
    cleaner = CorpusCleaner("de", "en")
    list(cleaner.clean(_corpus()))
    data = json.loads(json.dumps(cleaner.report.to_dict()))
    assert data["removed"]["length_ratio"] == 1
    assert data["normalised"]["source"]["tag"] == 2
    assert data["tokens_kept"] == {"source": 88, "target": 96}
    text = str(cleaner.report)
    assert "length_ratio" in text
    assert "pairs kept" in text
    assert "[incomplete]" not in text


@pytest.mark.parametrize(("max_tokens", "max_ratio"), [(0, 9.0), (80, 0.5), (80, float("nan"))])
def test_bad_limits(max_tokens: int, max_ratio: float) -> None:
    with pytest.raises(ConfigurationError):
        CorpusCleaner("de", max_tokens=max_tokens, max_ratio=max_ratio)


def test_unknown_language() -> None:
    with pytest.raises(ConfigurationError, match="choose one of"):
        CorpusCleaner("xx")


# Placeholders and markup that must not survive normalisation (in text whose raw form had no
# escaped spelling of them, such as &lt;b&gt; or %%s, which legitimately become <b> and % s).
_SURVIVOR = re.compile(
    r"%[sd]\b|%\d\$[sd]|%\(\w+\)[sd]|(?<!\{)\{\d\}(?!\})"
    r"|</?(?:b|i|p|span|a|qt|html|br)\b[^<>]*>|&(?:amp|lt|gt|quot|#\d+);"
    r"|\([_&~][A-Z]\)|(?<![\w&~./])_[A-Z][a-z]+\b"
)
