"""Normalisation of UI strings, help paragraphs and queries before tokenisation.

The parallel corpus is made of gettext catalogs and LibreOffice help (``../shared/data``
README §3): its strings carry printf/brace placeholders, markup, entities and keyboard
accelerators that a translator never types into a search box. :func:`normalize` removes or
unescapes them so that the translation model (Hieber & Riezler 2015, §5 "Data and Systems") is
trained on the same kind of text it later sees in queries (§3). It is the one function applied to
both sides of the training corpus and to every query.

Steps, in order (each documented on its helper):

1. :func:`clean_unicode` — drop lone surrogates, U+FFFD, non-characters, control characters
   (whitespace controls become spaces) and format characters (zero-width space, BOM, soft
   hyphen, bidi marks); then Unicode NFKC (full-width forms, ligatures, ``…`` → ``...``).
2. Markup: ``<style>``/``<script>`` elements, comments, doctype; then HTML/XML tags from a
   fixed list of markup names (``<b>``, ``</b>``, ``<a href=...>``, ``<br/>``, KDE/DocBook/
   LibreOffice help elements). ``<file>``, ``<name>``, ``<Datei>``, ``<INT_MAX>`` are usage
   metavariables, not markup, and stay (the tokenizer splits off the angle brackets).
3. Entities ``&amp;``, ``&lt;``, ``&#39;``, ``&#x27;`` are unescaped *after* tags are removed,
   so ``&lt;b&gt;`` (text that shows a tag) stays visible as ``<b>``.
4. Placeholders (printf ``%s %d %1$s %-10s %.*s %lu``, Python ``%(name)s``,
   Qt ``%1 %L1``, GCC's ``%qs %<...%>``, ``%{name}``, ``%PRODUCTNAME``, ``{0} {name} {}``,
   ``$(ARG1) ${var} $[officename]``) are removed; ``%%`` becomes ``% `` (a percent sign that
   cannot glue to the next letter); a ``%`` after a digit or before a space (``50%``,
   ``10 %``, ``10%ige``) is a percent sign and stays. Inside a URL, ``%20``-style
   percent-encoding is kept (``http://host:%d/%s`` loses its placeholders).
5. Outside URLs: keyboard accelerators. ``(_S)``/``(&S)`` after a Chinese label are removed;
   ``_``, ``&``, ``~`` directly before a letter at the start of a word (or of a menu path
   step, ``/File/_Open``) are removed (``_File``, ``&File``, ``~File``) unless the word is
   an identifier with more underscores (``_NET_WM``, ``__init__``) or ``&&`` (left as it is).
   Inside a word the marker is removed only in the shape of a label, capital + lower case
   letters on both sides (``Ö_ffnen``, ``Übe&rsetzen``, ``Spe~ichern``); ``max_size``,
   ``O_DIRECT``, ``AT&T``, ``R&D``, ``a&b`` stay, and so do lower-case labels such as
   ``an_zeigen``, which cannot be told apart from snake-case identifiers.
6. Outside URLs: literal ``\\n``, ``\\t``, ``\\r`` become a space unless a lower-case letter
   follows (so ``C:\\new\\temp`` keeps its backslashes); so does Lisp format's ``~%``.
7. Whitespace is collapsed; optionally the text is lower-cased.

Case is kept by default because the tokenizers (Moses decides whether a period ends a word
by the case of the next word) and the German sentence splitter need it; every tokenizer
lower-cases its tokens, and :func:`service.text.preprocess` composes the two.
"""

from __future__ import annotations

import html
import re
import sys
import unicodedata
from dataclasses import dataclass, fields
from functools import cache

from service.errors import InvalidInputError

# --- counts ---------------------------------------------------------------------------------


@dataclass(slots=True)
class NormalizationCounts:
    """How many items each rule of :func:`normalize` changed (added up over many calls)."""

    control: int = 0  # characters removed: controls, format characters, surrogates, U+FFFD
    printf: int = 0  # %-placeholders (printf, Python, Qt, GCC, %{name}, %VAR)
    brace: int = 0  # {0}, {name}, {}
    variable: int = 0  # $(VAR), ${var}, $[var]
    tag: int = 0  # markup tags, comments, doctype, style/script elements
    entity: int = 0  # character references unescaped
    accelerator: int = 0  # keyboard accelerator markers removed
    escape: int = 0  # literal \n \t \r sequences

    def add(self, other: NormalizationCounts) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> dict[str, int]:
        return {f.name: int(getattr(self, f.name)) for f in fields(self)}

    @property
    def total(self) -> int:
        return sum(self.to_dict().values())


# --- 1. Unicode ---------------------------------------------------------------------------------

# Control characters that are whitespace (str.split() splits on them): turned into spaces.
_WS_CONTROLS = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85"


@cache
def _bad_chars() -> re.Pattern[str]:
    """Characters to delete: Cc (except whitespace), Cf, surrogates, U+FFFD, non-characters.

    Built once per process from the running Python's Unicode database (about 0.1 s), so the
    set follows the interpreter's Unicode version instead of a hand-copied list.
    """
    singles: list[int] = []
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if (cat == "Cc" and ch not in _WS_CONTROLS) or cat in ("Cf", "Cs"):
            singles.append(cp)
    singles += [0xFFFD, 0xFFFE, 0xFFFF]
    singles += [cp for cp in range(0xFDD0, 0xFDF0)]
    ranges: list[tuple[int, int]] = []
    for cp in sorted(set(singles)):
        if ranges and cp == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    parts = [
        f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}"  # escapes keep surrogates legal
        for a, b in ranges
    ]
    return re.compile("[" + "".join(parts) + "]+")


def clean_unicode(text: str, counts: NormalizationCounts | None = None) -> str:
    """Remove broken and invisible characters, turn control whitespace into spaces, NFKC.

    Safe on any ``str``, including lone surrogates from ``surrogateescape`` decoding or
    JSON ``"\\ud800"`` escapes; raises :class:`InvalidInputError` for a non-string.
    """
    if not isinstance(text, str):
        hint = " (decode bytes as UTF-8 first)" if isinstance(text, bytes | bytearray) else ""
        raise InvalidInputError(f"expected text as str, got {type(text).__name__}{hint}")
    bad = _bad_chars()
    if bad.search(text):
        removed = 0

        def _drop(m: re.Match[str]) -> str:
            nonlocal removed
            removed += len(m.group(0))
            return ""

        text = bad.sub(_drop, text)
        if counts is not None:
            counts.control += removed
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return text


# --- 2. markup ----------------------------------------------------------------------------------

_DROP_ELEMENTS = re.compile(r"<(style|script)\b[^>]*>.*?</\1\s*>", re.S | re.I)
_COMMENT_LIKE = re.compile(
    r"<!--.*?-->|<![A-Za-z][^<>]*>|<\?[A-Za-z][^<>]*\?>|<!\[CDATA\[|\]\]>", re.S
)
_TAG = re.compile(r"<(/?)([A-Za-z][\w:.-]*)(\s[^<>]*)?(/?)>")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Markup element names (HTML, Qt rich text, Pango, KDE KUIT, DocBook/Mallard, LibreOffice help).
_MARKUP = _words(
    """
    a abbr acronym address article aside b big blockquote body br caption center cite code col
    colgroup dd del dfn div dl dt em font footer h1 h2 h3 h4 h5 h6 head header hr html i img ins
    kbd li meta nav nobr ol p pre q s samp section small span strike strong sub sup table tbody
    td tfoot th thead title tr tt u ul wbr
    qt nl markup
    application bcode command email emphasis envar filename icode interface link message note
    numid placeholder resource shortcut warning para subtitle list item
    guibutton guilabel guimenu guimenuitem guisubmenu keycap keycombo literal replaceable ulink
    userinput computeroutput systemitem emph
    ahelp bookmark bookmark_value switchinline caseinline defaultinline embedvar menuitem keycode
    dolphin_emphasis
    """
)
# Names that are never metavariables: a bare opening tag of these is stripped on sight. Any
# other markup name needs evidence that it is markup: attributes, a closing or self-closing
# form, or its closing tag somewhere in the same text (``<command>`` alone is a metavariable).
_ALWAYS_MARKUP = _words("br hr img meta nl wbr col p li td tr th dt dd html body head qt")


def _strip_markup(text: str, counts: NormalizationCounts) -> str:
    text, n = _DROP_ELEMENTS.subn(" ", text)
    counts.tag += n
    text, n = _COMMENT_LIKE.subn(" ", text)
    counts.tag += n
    lowered: str | None = None

    def _tag(m: re.Match[str]) -> str:
        nonlocal lowered
        closing, name, attrs = m.group(1) + m.group(4), m.group(2), m.group(3) or ""
        key = name.lower()
        if key not in _MARKUP:
            return m.group(0)
        # <A>, <B> (upper-case single letters) are markup only with evidence
        always = key in _ALWAYS_MARKUP and not (name != key and len(name) == 1)
        if not (closing or attrs.strip() or always):
            if lowered is None:
                lowered = text.lower()
            if "</" + key not in lowered:
                return m.group(0)
        counts.tag += 1
        return " "

    return _TAG.sub(_tag, text)


# --- 3. entities -------------------------------------------------------------------------------

_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


def _unescape_entities(text: str, counts: NormalizationCounts) -> str:
    def _one(m: re.Match[str]) -> str:
        ref = m.group(0)
        value = html.unescape(ref)
        if value == ref:  # an unknown name such as &foo; is text
            return ref
        counts.entity += 1
        return clean_unicode(value, counts)

    return _ENTITY.sub(_one, text)


# --- 4. placeholders ------------------------------------------------------------------------

_PLACEHOLDER = re.compile(
    r"""
      (?P<percent>%%)
    | (?P<printf>
          %\([\w.-]{1,40}\)(?:[-+\#0]*\d*(?:\.\d+)?[A-Za-z])?          # %(name)s
        | %\{[A-Za-z_][\w.-]{0,40}\}                                  # %{name}
        | %[A-Z][A-Z0-9_]+%                                           # %USERNAME%
        | (?<![\d~])%[A-Z][A-Z0-9_]{2,}(?![a-z])                      # %PRODUCTNAME
        | %[<>]                                                       # GCC quotes %< %>
        | (?<![\d~])%L\d{1,2}(?!\d)                                   # Qt %L1
        | (?<![\d~])%(?:\d+\$)?[-+\#0'_^]*(?:\d+|\*(?:\d+\$)?)?
              (?:\.(?:\d+|\*(?:\d+\$)?))?(?:hh|ll|I64|I32|[hlLqjztwZ])?[A-Za-z]   # printf
        | (?<![\d~])%\d{1,2}(?!\d)                                    # Qt %1
      )
    | (?P<brace>(?<!\{)\{(?:\d{1,2}|[A-Za-z_][\w.]{0,40})?(?:![rsa])?(?::[^{}\s]{0,20})?\}(?!\}))
    | (?P<variable>\$(?:\(\w+\)|\{\w+\}|\[\w+\]))
    """,
    re.X,
)


def _strip_placeholders(text: str, counts: NormalizationCounts, in_url: bool = False) -> str:
    def _one(m: re.Match[str]) -> str:
        kind = m.lastgroup
        if in_url and _URL_ESCAPE.match(text, m.start()):
            return m.group(0)  # %20, %2F: percent-encoding, not a placeholder
        if kind == "percent":
            return "% "  # a literal percent sign; the space keeps "%%s" from becoming "%s"
        if kind == "printf":
            counts.printf += 1
        elif kind == "brace":
            counts.brace += 1
        else:
            counts.variable += 1
        return "" if in_url else " "  # a URL stays one word

    return _PLACEHOLDER.sub(_one, text)


# --- 5. accelerators ---------------------------------------------------------------------------

_ACCEL_PAREN = re.compile(r"\(\s*[_&~][A-Za-z0-9]\s*\)")
_ACCEL_START = re.compile(
    r"(?<![\w&~$.\\])[&~](?=[^\W\d_])"  # &File ~File /File/_Open (not &&x, a&b)
    r"|(?<![\w$.\\])_(?=[^\W\d_][^\W_]*(?!\w))"  # _File (not _NET_WM, __init__)
)
_ACCEL_MID = re.compile(r"(?<![\w&~$./\\:@-])([^\W\d_]+)([_&~])([^\W\d_]+)(?![\w&~/\\@]|[.:-]\w)")


def _is_label_shape(left: str, right: str) -> bool:
    """``Ö|ffnen``, ``Sei|teneinstellungen``, ``C|hange``: capital, then lower case only."""
    return left[0].isupper() and (len(left) == 1 or left[1:].islower()) and right.islower()


def _strip_accelerators(text: str, counts: NormalizationCounts) -> str:
    if "(" in text:
        text, n = _ACCEL_PAREN.subn("", text)
        counts.accelerator += n
    text, n = _ACCEL_START.subn("", text)
    counts.accelerator += n

    def _mid(m: re.Match[str]) -> str:
        left, right = m.group(1), m.group(3)
        if _is_label_shape(left, right):
            counts.accelerator += 1
            return left + right
        return m.group(0)

    return _ACCEL_MID.sub(_mid, text)


# --- 6. escapes, URLs ------------------------------------------------------------------------

_URL_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_ESCAPE = re.compile(r"(?<!\\)\\[ntr](?![a-z])|~%")  # C escapes; Lisp format's newline
_URL = re.compile(r"\b(?:https?|ftp|file)://[^\s<>\"']+|\bwww\.[^\s<>\"']+")


def _text_rules(piece: str, counts: NormalizationCounts) -> str:
    if "%" in piece or "{" in piece or "$" in piece:
        piece = _strip_placeholders(piece, counts)
    if "_" in piece or "&" in piece or "~" in piece:
        piece = _strip_accelerators(piece, counts)
    if "\\" in piece or "~%" in piece:
        piece, n = _ESCAPE.subn(" ", piece)
        counts.escape += n
    return piece


def _outside_urls(text: str, counts: NormalizationCounts) -> str:
    if "://" not in text and "www." not in text:
        return _text_rules(text, counts)
    out: list[str] = []
    pos = 0
    for m in _URL.finditer(text):
        out.append(_text_rules(text[pos : m.start()], counts))
        url = m.group(0)
        if "%" in url or "{" in url or "$" in url:
            url = _strip_placeholders(url, counts, in_url=True)
        out.append(url)
        pos = m.end()
    out.append(_text_rules(text[pos:], counts))
    return "".join(out)


# --- the one entry point ---------------------------------------------------------------------


def normalize(
    text: str, *, lowercase: bool = False, counts: NormalizationCounts | None = None
) -> str:
    """Normalise one string (a corpus side or a query); see the module docstring.

    ``counts``, if given, is incremented by what each rule changed. The result has single
    spaces and no leading/trailing space; it is ``""`` when nothing but markup was left.
    """
    c = counts if counts is not None else NormalizationCounts()
    text = clean_unicode(text, c)
    if "<" in text or "]]>" in text:
        text = _strip_markup(text, c)
    if "&" in text:
        text = _unescape_entities(text, c)
    text = _outside_urls(text, c)
    text = " ".join(text.split())
    return text.lower() if lowercase else text
