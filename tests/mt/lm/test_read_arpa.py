"""Tests of the ARPA reader (service.mt.lm.read_arpa, service.mt.lm.arpa_scan): correct float32
rounding of ARPA numbers and the fast parser against the exact one, malformed files named by
file and line, separators and gzip."""

from __future__ import annotations

import random
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from service.errors import DataFormatError, MissingResourceError
from service.mt.lm import (
    ArpaLM,
    build_lm_table,
)
from service.mt.lm.arpa_scan import parse_float32
from service.mt.lm.read_arpa import exact_float32, read_arpa
from tests.mt.lm.toy_lm import (
    PRUNED_ARPA,
    TOY_ARPA,
    TOY_CASES,
    write,
)


def test_float32_rounding_is_correct_where_float64_rounds_twice(tmp_path: Path) -> None:
    # a decimal just beside a float32 rounding boundary: through float64 it lands on the
    # boundary and rounds to even, KenLM's StringToFloat rounds it the right way
    text = None
    for start in np.arange(-0.61, -0.60, 1e-4, dtype=np.float32):
        lo = np.float32(start)
        hi = np.nextafter(lo, np.float32(-1))
        mid = (float(lo) + float(hi)) / 2
        with localcontext() as ctx:
            ctx.prec = 80
            for offset in (Decimal("1e-30"), Decimal("-1e-30")):
                candidate = format(Decimal(mid) + offset, "f")
                exact = Fraction(Decimal(candidate))
                right = min((lo, hi), key=lambda c: abs(Fraction(float(c)) - exact))
                if np.float32(float(candidate)) != right:
                    text, want = candidate, right
                    break
        if text is not None:
            break
    assert text is not None
    arpa = write(tmp_path, TOY_ARPA.replace("-0.6\ta\t-0.3", f"{text}\ta\t-0.3"))
    table = build_lm_table(arpa, verify=True)  # KenLM agrees
    assert table.uni_probs[table.vocab["a"]] == want
    assert float(table.uni_probs[table.vocab["a"]]) != float(np.float32(float(text)))


def test_the_fast_number_parser_agrees_with_the_exact_one() -> None:
    rng = random.Random(7)
    texts = ["0", "-0", "-99", "1e-3", "-1.5E+2", "+0.25", "-0.30102999566398114", ".5", "5."]
    for _ in range(3000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 22)))
        point = rng.randint(0, len(digits))
        text = f"-{digits[:point]}.{digits[point:]}" if point else f"-{digits}"
        if rng.random() < 0.3:
            text += f"e{rng.randint(-30, 5)}"
        texts.append(text)
    fast_paths = 0
    for text in texts:
        buf = np.frombuffer(text.encode(), dtype=np.uint8)
        value, sure = parse_float32(buf, 0, len(buf))
        if sure:
            fast_paths += 1
            exact = exact_float32(text)
            assert np.float32(value).view(np.int32) == exact.view(np.int32), text
    assert fast_paths > 2000
    for bad in ("", "-", "1.2.3", "e5", "--1", "0x10", "1e"):
        buf = np.frombuffer(bad.encode(), dtype=np.uint8)
        assert not parse_float32(buf, 0, len(buf))[1], bad


MALFORMED = [
    (TOY_ARPA, "", None, "no \\\\data\\\\ header"),
    ("\\data\\\n", "", 1, "text before the \\\\data"),
    ("\\data\\", "hello\n\\data\\", 1, "text before the"),
    ("ngram 2=3", "ngram 2=x", 3, "expected 'ngram N=count'"),
    ("ngram 2=3", "ngram 3=3", 3, "expected the count of the 2-grams"),
    ("-0.6\ta\t-0.3", "-0.6\ta\t-0.3\t7", 10, "needs 2 or 3 fields, got 4"),
    ("-0.6\ta\t-0.3", "-0.6x\ta\t-0.3", 10, "bad number"),
    ("-0.5\ta b\t-0.25", "-0.5\ta b\tnan", 15, "finite"),
    ("-0.6\ta\t-0.3", "0.6\ta\t-0.3", 10, "positive log10 probability"),
    ("-0.2\t<s> a b", "-0.2\t<s> a b\t-0.1", 19, "highest order \\(3\\) has no backoff"),
    ("-0.3\tb </s>", "-0.3\tb c", 16, "'c' of this 2-gram is not listed"),
    ("-0.8\tb\t-0.2", "-0.8\ta\t-0.2", 11, "unigram 'a' is listed twice"),
    ("ngram 2=3", "ngram 2=2", 16, "more than the 2 lines"),
    ("ngram 2=3", "ngram 2=4", 18, "section has 3 lines, its header declares 4"),
    ("\\2-grams:", "\\4-grams:", 13, "expected the \\\\2-grams: header"),
    ("\\end\\\n", "", None, "expected \\\\end\\\\"),
    ("\\end\\\n", "\\end\\\nmore\n", 22, "text after"),
    ("-1.0\t<unk>", "-1.0\tunk", None, "no <unk> unigram"),
    ("-99\t<s>\t-0.5", "-99\tS\t-0.5", None, "no <s> unigram"),
    ("-0.7\t</s>", "-0.7\tS", None, "no </s> unigram"),
]


@pytest.mark.parametrize(("old", "new", "line", "message"), MALFORMED)
def test_malformed_arpa_files_name_file_and_line(
    tmp_path: Path, old: str, new: str, line: int | None, message: str
) -> None:
    assert old in TOY_ARPA
    arpa = write(tmp_path, TOY_ARPA.replace(old, new, 1))
    with pytest.raises(DataFormatError, match=message) as err:
        build_lm_table(arpa, verify=False)
    assert err.value.path == str(arpa)
    assert err.value.line_no == line


def test_separators_like_arpalm_and_gzip(tmp_path: Path) -> None:
    import gzip

    spaced = TOY_ARPA.replace("\t", "  ").replace("\n", " \r\n").replace("\\data\\", "\n\\data\\")
    arpa = write(tmp_path, spaced, "spaced.arpa")
    table = build_lm_table(arpa, verify=False)
    packed = tmp_path / "lm.arpa.gz"
    packed.write_bytes(gzip.compress(TOY_ARPA.encode()))
    for other in (table, build_lm_table(packed, verify=False)):
        for context, word, expected, _ in TOY_CASES:
            assert other.logp10(context, word) == expected
    assert ArpaLM(arpa).logp(("<s>", "a"), "b") == pytest.approx(table.logp(("<s>", "a"), "b"))
    with pytest.raises(MissingResourceError):
        build_lm_table(tmp_path / "none.arpa")


@pytest.mark.parametrize(("old", "new", "line", "message"), MALFORMED)
def test_arpalm_refuses_what_the_table_refuses(
    tmp_path: Path, old: str, new: str, line: int | None, message: str
) -> None:
    arpa = write(tmp_path, TOY_ARPA.replace(old, new, 1))
    with pytest.raises(DataFormatError, match=message) as err:
        ArpaLM(arpa)
    assert err.value.line_no == line


@pytest.mark.parametrize("text", [TOY_ARPA, PRUNED_ARPA], ids=["toy", "pruned"])
def test_the_reference_reads_the_numbers_the_table_reads(tmp_path: Path, text: str) -> None:
    # one parse: ArpaLM's float64 numbers as written, the arrays the same rounded to float32,
    # a probability as -|p| and a missing or zero backoff as -0.0 (KenLM's storage)
    arpa = read_arpa(write(tmp_path, text.replace("-0.7\t</s>", "0\t</s>")))
    entries = arpa.entries()
    assert len(entries) == sum(arpa.counts) and ArpaLM(arpa.path).entries == entries
    assert entries[("</s>",)] == (0.0, 0.0) and entries[("a", "b")] == (-0.5, -0.25)

    def stored(p: float, b: float) -> tuple[int, int]:
        return (
            int(np.float32(-abs(p)).view(np.int32)),
            int((np.float32(b) if b else np.float32(-0.0)).view(np.int32)),
        )

    for i, word in enumerate(arpa.words):
        got = (int(arpa.uni_probs[i].view(np.int32)), int(arpa.uni_backoffs[i].view(np.int32)))
        assert got == stored(*entries[(word,)]), word
    for row in range(arpa.ngram_words.shape[0]):
        ngram = tuple(arpa.words[i] for i in arpa.ngram_words[row].tolist() if i >= 0)
        p, b = arpa.ngram_probs[row], arpa.ngram_backoffs[row]
        assert (int(p.view(np.int32)), int(b.view(np.int32))) == stored(*entries[ngram]), ngram
