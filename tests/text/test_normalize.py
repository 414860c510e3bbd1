"""Normalisation rules: one hand-written row per rule, and the things that must not change."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from service.errors import InvalidInputError
from service.text import NormalizationCounts, clean_unicode, normalize

# (input, expected output, the counter that must be incremented, by how much)
RULES = [
    # printf family
    ("key %s: not found", "key : not found", "printf", 1),
    ("%d files, %u bytes", "files, bytes", "printf", 2),
    ("abandoning lease to %2$s of %1$s", "abandoning lease to of", "printf", 2),
    ("[%-10s] %5.2f%% done", "[ ] % done", "printf", 2),
    ("%.*s and %lu and %lld and %zu", "and and and", "printf", 4),
    ("%(count)d items in %(name)s", "items in", "printf", 2),
    ("Cannot find mother (Mother=%(mother))", "Cannot find mother (Mother= )", "printf", 1),
    ("%1 cubic meters", "cubic meters", "printf", 1),
    ("%L1 of %2", "of", "printf", 2),
    ("unknown cpu %qs for %<-mtune%>", "unknown cpu for -mtune", "printf", 3),
    ("Hello %{user}", "Hello", "printf", 1),
    ("%PRODUCTNAME Writer", "Writer", "printf", 1),
    ("Path %USERPROFILE%\\x", "Path \\x", "printf", 1),
    # brace placeholders
    ("{0} files in {1}", "files in", "brace", 2),
    ("Deleting {name}... {}", "Deleting ...", "brace", 2),
    ("{count:,} of {total!r}", "of", "brace", 2),
    # variables
    ("$(ARG1) and ${var} and $[officename]", "and and", "variable", 3),
    # tags
    ("<b>Bold</b> text", "Bold text", "tag", 2),
    ('<a href="http://x.org/?a=1&amp;b=2">link</a>', "link", "tag", 2),
    ("line<br/>break<br />again<BR>", "line break again", "tag", 3),
    ("<p>Para one <p>two", "Para one two", "tag", 2),
    ('<span style="color:red">Red</span>', "Red", "tag", 2),
    ("<!-- note --><!DOCTYPE html>text", "text", "tag", 2),
    ("<style>p { color: red; }</style>Body", "Body", "tag", 1),
    ("<command>ls</command> lists", "ls lists", "tag", 2),
    # entities (unescaped after tags are removed)
    ("Tom &amp; Jerry", "Tom & Jerry", "entity", 1),
    ("&lt;file&gt;", "<file>", "entity", 2),
    ("It&#39;s &#x27;here&#x27;", "It's 'here'", "entity", 3),
    ("a&nbsp;b", "a b", "entity", 1),
    ("&lt;b&gt;shown&lt;/b&gt;", "<b>shown</b>", "entity", 4),
    # accelerators
    ("_File", "File", "accelerator", 1),
    ("&File", "File", "accelerator", 1),
    ("~File", "File", "accelerator", 1),
    ("Save _As...", "Save As...", "accelerator", 1),
    ("/File/_Open", "/File/Open", "accelerator", 1),
    ("Ö_ffnen", "Öffnen", "accelerator", 1),
    ("Übe&rsetzen", "Übersetzen", "accelerator", 1),
    ("Spe~ichern", "Speichern", "accelerator", 1),
    ("搜索并运行一个命令(_S)", "搜索并运行一个命令", "accelerator", 1),
    ("文件（&F）", "文件", "accelerator", 1),  # full-width brackets: NFKC first
    # literal escapes
    ("Error\\nPlease retry", "Error Please retry", "escape", 1),
    ("Name:\\tValue\\r", "Name: Value", "escape", 2),
    ("Erfolg.~%Dateien", "Erfolg. Dateien", "escape", 1),
    # control and format characters, broken Unicode
    ("a\x00b\x07c", "abc", "control", 2),
    ("zero\u200bwidth\ufeff", "zerowidth", "control", 2),
    ("soft\u00adhyphen", "softhyphen", "control", 1),
    ("lone\ud800surrogate", "lonesurrogate", "control", 1),
    ("M\ufffdller", "Mller", "control", 1),
]


@pytest.mark.parametrize(("raw", "expected", "counter", "n"), RULES)
def test_rule(raw: str, expected: str, counter: str, n: int) -> None:
    counts = NormalizationCounts()
    assert normalize(raw, counts=counts) == expected
    assert getattr(counts, counter) == n
    others = {k: v for k, v in counts.to_dict().items() if k != counter}
    assert sum(others.values()) == 0, others


UNCHANGED = [
    "a && b",  # shell/C logical and
    "if (x&&y) return",
    "max_size must be positive",  # snake case identifiers
    "set LC_ALL and O_DIRECT",
    "__init__ and _NET_WM_STATE",
    "an_zeigen",  # a lower-case label cannot be told from an identifier
    "C++ and C#",
    "AT&T and R&D and Q&A",
    "a&b",
    "http://example.org/a_b?x=1&y=%20z",
    "see www.example.com/~user/_priv",
    "/usr/lib/x86_64-linux-gnu",
    "C:\\new\\temp",  # backslash + lower-case letter: a path, not an escape
    "50% of 10 %",
    "eine 10%ige Lösung",
    "Usage: prog <file> [<options>]",  # metavariables, not markup
    "Mail <user@example.org>",
    "a < b > c",
    "{1;2;3} and {a, b}",  # spreadsheet array, shell brace expansion
    "@emph{{type}}",  # doubled braces are not a placeholder
    "x ~ y",
    "St. Vincent",
]


@pytest.mark.parametrize("text", UNCHANGED)
def test_must_not_change(text: str) -> None:
    counts = NormalizationCounts()
    assert normalize(text, counts=counts) == text
    assert counts.total == 0


def test_entity_then_accelerator() -> None:
    counts = NormalizationCounts()
    assert normalize("&amp;Preferences", counts=counts) == "Preferences"
    assert (counts.entity, counts.accelerator) == (1, 1)
    counts = NormalizationCounts()
    assert normalize('<span color="red">_Hintergrund:</span>', counts=counts) == "Hintergrund:"
    assert (counts.tag, counts.accelerator) == (2, 1)


def test_percent_escape_is_a_percent_sign_that_does_not_glue() -> None:
    assert normalize("100%%") == "100%"
    assert normalize("contains %%f or %%p") == "contains % f or % p"


def test_placeholders_inside_urls_are_removed_but_percent_encoding_stays() -> None:
    assert normalize("see http://localhost:%i/x") == "see http://localhost:/x"
    assert normalize("http://gnu.org/software/%s/ and %s") == "http://gnu.org/software// and"
    assert normalize("http://x/a%20b%2Fc") == "http://x/a%20b%2Fc"


def test_nfkc_and_whitespace() -> None:
    assert normalize("ﬁle …") == "file ..."
    assert normalize("ＡＢＣ１２３　全角") == "ABC123 全角"
    assert normalize("  a \t\n b  \u3000 c ") == "a b c"
    assert normalize("<b></b> %s {0}") == ""


def test_lowercase_option() -> None:
    assert normalize("Öffnen _Datei", lowercase=True) == "öffnen datei"
    assert normalize("Öffnen _Datei") == "Öffnen Datei"


def test_counts_add_up_over_calls() -> None:
    counts = NormalizationCounts()
    normalize("%s <b>x</b>", counts=counts)
    normalize("_Open %d", counts=counts)
    assert counts.to_dict() == {
        "control": 0,
        "printf": 2,
        "brace": 0,
        "variable": 0,
        "tag": 2,
        "entity": 0,
        "accelerator": 1,
        "escape": 0,
    }
    other = NormalizationCounts(tag=5)
    counts.add(other)
    assert counts.tag == 7
    assert counts.total == 10


def test_non_string_input_is_a_clear_error() -> None:
    with pytest.raises(InvalidInputError, match="decode bytes as UTF-8"):
        normalize(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="got int"):
        normalize(3)  # type: ignore[arg-type]


def test_clean_unicode_removes_every_control_and_format_character() -> None:
    """Reference: every Cc (but whitespace), Cf and Cs code point, by the Unicode database."""
    bad = [
        chr(cp)
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) in ("Cf", "Cs")
        or (unicodedata.category(chr(cp)) == "Cc" and not chr(cp).isspace())
    ]
    assert len(bad) > 2000  # the surrogates alone are 2048
    text = "x".join(bad)
    assert clean_unicode(text) == "x" * (len(bad) - 1)


def test_clean_unicode_keeps_whitespace_controls_as_separators() -> None:
    assert normalize("a\x1cb\x85c\x0bd") == "a b c d"


def test_broken_unicode_from_surrogateescape() -> None:
    raw = b"Gr\xfc\xdfe <b>Welt</b>".decode("utf-8", errors="surrogateescape")
    out = normalize(raw)
    assert out == "Gre Welt"
    out.encode("utf-8")  # the result is always encodable
