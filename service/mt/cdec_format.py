"""cdec's text grammar format: export and import.

One rule per line (Dyer et al. 2010, the decoder that Hieber & Riezler 2015, §3, build on), fields
separated by the token ``|||``::

    [X] ||| [X,1] des [X,2] ||| [X,2] of the [X,1] ||| LogPEgivenF=-0.5 Arity=2 ||| 1-2 3-3

* The left-hand side is ``[L]``. Source gaps are ``[L,k]`` (or cdec's bare ``[L]``, numbered
  left to right); target gaps are ``[L,k]`` or cdec's ``[k]`` (the label is then the source
  gap's). Both forms are accepted on import; export writes ``[L,k]`` unless asked for ``[k]``.
* Features are ``name=value`` tokens, split at the *last* ``=`` (so a name may contain ``=``;
  a value never does). A token without ``=`` is a positional value named ``PhraseModel_<i>``
  (``i`` counting only such tokens), as in cdec's older grammars. Absent features are 0; export
  writes only non-zero values. Values are written in the shortest form that reads back to the
  same float32 (Rule objects: the same float64), so binary -> text -> binary is lossless.
* The alignment field (optional on import) lists ``i-j`` pairs; positions count every symbol,
  gaps included, as in :mod:`service.mt.rules`.

What is escaped: nothing. Lines are split into whitespace-separated tokens and fields at tokens
that are exactly ``|||``, so terminals such as ``a|||b``, ``x=1`` or ``=`` are written as they
are and read back unchanged. A terminal that *is* ``|||``, or that looks like a gap (``[X]``,
``[X,3]``, ``[1]``), cannot be told apart on reading; export refuses it with a
:class:`~service.errors.DataFormatError` naming the file and rule instead of writing a line
that would read back differently. Terminals never contain whitespace (the tokenizers split on
it, and the binary format refuses it).

Files ending in ``.gz`` are gzip-compressed on export; import detects gzip by its magic bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from service.data.io import ErrorPolicy, MalformedLines, iter_lines, open_output
from service.errors import DataFormatError
from service.mt.grammar import (
    Grammar,
    GrammarBuilder,
    InvalidRuleError,
    check_terminal,
    load_grammar,
)
from service.mt.rules import Rule, is_nt, nt, nt_index

SEP = "|||"
TargetStyle = Literal["indexed", "cdec"]

_LHS = re.compile(r"^\[([A-Za-z]+)\]$")
_SRC_GAP = re.compile(r"^\[([A-Za-z]+)(?:,([0-9]+))?\]$")
_TGT_GAP = re.compile(r"^\[(?:([A-Za-z]+),)?([0-9]+)\]$")
_ALIGN = re.compile(r"^([0-9]+)-([0-9]+)$")


class _BadLine(ValueError):
    """A reason why a line is not a rule."""


def _looks_like_gap(token: str) -> bool:
    return bool(_SRC_GAP.match(token) or _TGT_GAP.match(token))


def _format_value(value: float, float32: bool) -> str:
    return str(np.float32(value)) if float32 else repr(float(value))


def format_rule(rule: Rule, *, target_style: TargetStyle = "indexed", float32: bool = False) -> str:
    """One cdec line for ``rule`` (without newline). Raises ValueError for an unwritable rule.

    ``float32`` writes values in the shortest form that round-trips a float32 (for rules read
    from a binary grammar); otherwise the shortest form of the float64.
    """
    for side in (rule.source, rule.target):
        for sym in side:
            if not is_nt(sym) and (sym == SEP or _looks_like_gap(sym) or check_terminal(sym)):
                raise ValueError(
                    f"terminal {sym!r} cannot be written in cdec format (it would read back as "
                    "a separator or gap, or contains whitespace); rename it"
                )
    target = (
        " ".join(f"[{nt_index(s)}]" if is_nt(s) else s for s in rule.target)
        if target_style == "cdec"
        else " ".join(rule.target)
    )
    feats = []
    for name, value in rule.features.items():
        if not name or name.split() != [name]:
            raise ValueError(f"feature name {name!r} is empty or contains whitespace")
        if value != 0:
            feats.append(f"{name}={_format_value(value, float32)}")
    align = " ".join(f"{i}-{j}" for i, j in rule.alignment)
    return (
        f"[{rule.lhs}] {SEP} {' '.join(rule.source)} {SEP} {target} {SEP} "
        f"{' '.join(feats)} {SEP} {align}"
    )


def _fields(line: str) -> list[list[str]]:
    fields: list[list[str]] = [[]]
    for tok in line.split():
        if tok == SEP:
            fields.append([])
        else:
            fields[-1].append(tok)
    return fields


def parse_rule(line: str) -> Rule:
    """Parse one cdec grammar line. Raises ValueError with the reason."""
    fields = _fields(line)
    if len(fields) not in (4, 5):
        raise _BadLine(
            f"expected 4 or 5 fields separated by ' {SEP} ' "
            f"(lhs, source, target, features[, alignment]), got {len(fields)}"
        )
    lhs_f, src_f, tgt_f, feat_f = fields[:4]
    align_f = fields[4] if len(fields) == 5 else []
    m = _LHS.match(lhs_f[0]) if len(lhs_f) == 1 else None
    if m is None:
        raise _BadLine(f"left-hand side must be one token [L], got {' '.join(lhs_f)!r}")
    if not src_f:
        raise _BadLine("empty source side")
    source: list[str] = []
    labels: dict[int, str] = {}
    for tok in src_f:
        g = _SRC_GAP.match(tok)
        if g is None:
            if _TGT_GAP.match(tok):
                raise _BadLine(f"source gap {tok!r} must carry a label, e.g. [X,1]")
            source.append(tok)
            continue
        k = int(g.group(2)) if g.group(2) else len(labels) + 1
        if k not in (1, 2) or k in labels:
            raise _BadLine(f"source gap {tok!r}: gaps must be [L,1] and [L,2], each once")
        labels[k] = g.group(1)
        source.append(nt(k, labels[k]))
    target: list[str] = []
    for tok in tgt_f:
        g = _TGT_GAP.match(tok)
        if g is None:
            if _SRC_GAP.match(tok):
                raise _BadLine(f"target gap {tok!r} must carry an index, e.g. [1] or [X,1]")
            target.append(tok)
            continue
        k = int(g.group(2))
        if k not in labels:
            raise _BadLine(f"target gap {tok!r} has no source gap [L,{k}]")
        if g.group(1) and g.group(1) != labels[k]:
            raise _BadLine(f"target gap {tok!r} has another label than source gap {k}")
        target.append(nt(k, labels[k]))
    features: dict[str, float] = {}
    unnamed = 0
    for tok in feat_f:
        name, eq, value = tok.rpartition("=")
        if not eq:
            name, value = f"PhraseModel_{unnamed}", tok
            unnamed += 1
        if not name:
            raise _BadLine(f"feature {tok!r} has no name")
        if name in features:
            raise _BadLine(f"feature {name!r} given twice")
        try:
            features[name] = float(value)
        except ValueError:
            raise _BadLine(f"feature {name!r}: {value!r} is not a number") from None
    alignment: list[tuple[int, int]] = []
    for tok in align_f:
        a = _ALIGN.match(tok)
        if a is None:
            raise _BadLine(f"alignment point {tok!r} is not i-j")
        i, j = int(a.group(1)), int(a.group(2))
        if i >= len(source) or j >= len(target):
            raise _BadLine(f"alignment point {tok} outside the rule's sides")
        alignment.append((i, j))
    return Rule(m.group(1), tuple(source), tuple(target), features, tuple(alignment))


def read_cdec(
    path: str | Path, on_error: ErrorPolicy | str = ErrorPolicy.FAIL
) -> Iterator[tuple[int, Rule]]:
    """Yield ``(line number, rule)`` for each rule line; blank lines are skipped."""
    bad = MalformedLines(Path(path), ErrorPolicy(on_error))
    yield from _read(path, bad)
    bad.report()


def _read(path: str | Path, bad: MalformedLines) -> Iterator[tuple[int, Rule]]:
    for line_no, line in iter_lines(path, bad):
        if not line.strip():
            continue
        try:
            yield line_no, parse_rule(line)
        except _BadLine as exc:
            bad.add(line_no, str(exc))


def write_cdec(
    rules: Iterable[Rule],
    path: str | Path,
    *,
    target_style: TargetStyle = "indexed",
    float32: bool = False,
) -> int:
    """Write ``rules`` to ``path`` (atomically; ``.gz`` compresses). Returns the line count."""
    n = 0
    with open_output(path) as out:
        for n, rule in enumerate(rules, start=1):
            try:
                out.write(format_rule(rule, target_style=target_style, float32=float32))
            except ValueError as exc:
                raise DataFormatError(
                    path, n, f"cannot export rule {_short(rule)}: {exc}"
                ) from None
            out.write("\n")
    return n


def _short(rule: Rule) -> str:
    return f"{' '.join(rule.source)} -> {' '.join(rule.target)}"


def export_cdec(
    grammar: Grammar | str | Path, path: str | Path, *, target_style: TargetStyle = "indexed"
) -> int:
    """Write a binary grammar as cdec text, in rule-id order (line ``r + 1`` is rule ``r``)."""
    g = grammar if isinstance(grammar, Grammar) else load_grammar(grammar)
    return write_cdec(g.rules(), path, target_style=target_style, float32=True)


def import_cdec(
    path: str | Path,
    out: str | Path,
    *,
    feature_names: Sequence[str] | None = None,
    on_error: ErrorPolicy | str = ErrorPolicy.FAIL,
) -> Grammar:
    """Read a cdec grammar file and store it as a binary grammar at ``out``.

    ``feature_names`` fixes the feature columns (a feature not listed is an error on its line);
    without it the columns are the names found, the project's own first. A rule the binary
    format cannot hold (e.g. an alignment position over 127) is a malformed line.
    """
    builder = GrammarBuilder(feature_names)
    bad = MalformedLines(Path(path), ErrorPolicy(on_error))
    for line_no, rule in _read(path, bad):
        try:
            builder.add(rule)
        except InvalidRuleError as exc:
            bad.add(line_no, str(exc))
    bad.report()
    builder.write(out)
    return load_grammar(out)
