"""Binary grammar storage, sentence filtering and cdec text format."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.errors import (
    ConfigurationError,
    DataFormatError,
    InvalidInputError,
    MissingResourceError,
)
from service.mt import grammar as grammar_mod
from service.mt.cdec_format import (
    export_cdec,
    format_rule,
    import_cdec,
    parse_rule,
    read_cdec,
    write_cdec,
)
from service.mt.grammar import (
    Grammar,
    GrammarBuilder,
    InvalidRuleError,
    Match,
    load_grammar,
    reference_filter,
    write_grammar,
)
from service.mt.rules import ARITY, LOG_P_E_GIVEN_F, LOG_P_F_GIVEN_E, Rule

NAMES = (LOG_P_E_GIVEN_F, LOG_P_F_GIVEN_E, ARITY)


def R(src: str, tgt: str, feats: dict[str, float] | None = None, align: str = "") -> Rule:
    pairs = tuple(tuple(int(x) for x in p.split("-")) for p in align.split())
    return Rule("X", tuple(src.split()), tuple(tgt.split()), feats or {}, pairs)  # type: ignore[arg-type]


TOY = [
    R("das haus", "the house", {LOG_P_E_GIVEN_F: -0.25, LOG_P_F_GIVEN_E: -1.5}, "0-0 1-1"),
    R("das", "the", {LOG_P_E_GIVEN_F: -0.1}, "0-0"),
    R("[X,1] über [X,2]", "[X,2] about [X,1]", {ARITY: 2.0}, "1-1"),
    R("grüße", "greetings", {LOG_P_E_GIVEN_F: -2.0}, "0-0"),
    R("das", "that", {LOG_P_E_GIVEN_F: -1.7}, "0-0"),
    R("中文 [X,1]", "chinese [X,1]", {ARITY: 1.0}, "0-0 1-1"),
    R("das [X,1]", "the [X,1]", {ARITY: 1.0, LOG_P_F_GIVEN_E: -0.3}, "0-0 1-1"),
]


def key(rule: Rule) -> tuple[object, ...]:
    return (rule.lhs, rule.source, rule.target, rule.alignment)


def dense(rule: Rule, names: tuple[str, ...] = NAMES) -> list[float]:
    return [float(np.float32(rule.features.get(n, 0.0))) for n in names]


@pytest.fixture
def toy(tmp_path: Path) -> Grammar:
    write_grammar(TOY, tmp_path / "g", feature_names=NAMES)
    return load_grammar(tmp_path / "g")


# --- binary round trip ----------------------------------------------------------------------


def test_rules_round_trip_through_binary(toy: Grammar) -> None:
    assert len(toy) == len(TOY)
    assert toy.feature_names == NAMES
    back = list(toy.rules())
    assert sorted(map(key, back)) == sorted(map(key, TOY))
    by_key = {key(r): r for r in back}
    for r in TOY:
        got = by_key[key(r)]
        assert list(got.features) == list(NAMES)  # dense: every feature, 0 where absent
        assert [np.float32(v) for v in got.features.values()] == dense(r)


def test_rules_grouped_by_source_in_input_order(toy: Grammar) -> None:
    block = toy.rules_for_source(["das"])
    assert len(block) == 2
    assert [toy.target(i) for i in block] == [("the",), ("that",)]  # input order kept
    assert toy.rules_for_source(["das", "[X,1]"]) != block
    assert len(toy.rules_for_source(["das", "[X,1]"])) == 1
    assert toy.rules_for_source(["haus"]) == range(0)  # a prefix/suffix of a pattern only
    assert toy.rules_for_source(["nie"]) == range(0)
    # patterns are sorted, so each block is contiguous and the blocks tile all rules
    starts = [toy.rules_of(p) for p in range(toy.num_patterns)]
    assert [r for b in starts for r in b] == list(range(len(toy)))


def test_target_sides_are_interned(tmp_path: Path) -> None:
    rules = [R("a", "x y"), R("b", "x y"), R("c", "x y"), R("d", "z")]
    write_grammar(rules, tmp_path / "g")
    g = load_grammar(tmp_path / "g")
    assert g.manifest["counts"]["targets"] == 2
    assert len(g.target_symbols) == 3


def test_features_are_float32_and_labels_kept(tmp_path: Path) -> None:
    rules = [Rule("S", ("[S,1]", "a"), ("[S,1]", "b"), {"F": 0.1}, ())]
    write_grammar(rules, tmp_path / "g")
    g = load_grammar(tmp_path / "g")
    assert g.features.dtype == np.float32 and g.features.shape == (1, 1)
    assert g.features[0, 0] == np.float32(0.1)
    assert key(g.rule(0)) == key(rules[0])


def test_empty_grammar(tmp_path: Path) -> None:
    write_grammar([], tmp_path / "g", feature_names=NAMES)
    g = load_grammar(tmp_path / "g")
    assert len(g) == 0 and g.feature_names == NAMES
    sg = g.filter(["das", "haus"])
    assert len(sg) == 0 and sg.num_rules == 0 and sg.spans() == []


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        (R("[X,2] a", "[X,2] b"), "source gaps"),
        (R("[X,1] a [X,1]", "[X,1] b"), "source gaps"),
        (R("[X,1] a", "b"), "target gaps"),
        (R("a", "b", align="0-1"), "alignment point 0-1"),
        (Rule("X", ("a b",), ("c",), {}, ()), "whitespace"),
        (Rule("X", (), ("c",), {}, ()), "empty source"),
        (Rule("X", ("a",), ("c",), {"F": float("nan")}, ()), "NaN"),
    ],
)
def test_invalid_rules_are_refused(tmp_path: Path, rule: Rule, reason: str) -> None:
    with pytest.raises(InvalidRuleError, match=reason) as info:
        write_grammar([R("ok", "fine"), rule], tmp_path / "g")
    assert "rule 1" in str(info.value)
    assert not (tmp_path / "g").exists()


def test_fixed_feature_names_refuse_unknown_feature(tmp_path: Path) -> None:
    with pytest.raises(InvalidRuleError, match="Other"):
        write_grammar([R("a", "b", {"Other": 1.0})], tmp_path / "g", feature_names=NAMES)


# --- atomic writes and damaged files -------------------------------------------------------


def test_overwrite_replaces_grammar_and_leaves_no_temp(tmp_path: Path) -> None:
    write_grammar(TOY, tmp_path / "g")
    write_grammar([R("eins", "one")], tmp_path / "g")
    assert len(load_grammar(tmp_path / "g")) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]


def test_failed_write_keeps_old_grammar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_grammar(TOY, tmp_path / "g")
    calls = []
    real_save = np.save

    def failing_save(*args: object, **kwargs: object) -> None:
        calls.append(1)
        if len(calls) == 5:
            raise OSError("disk full")
        real_save(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(grammar_mod.np, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        write_grammar([R("eins", "one")], tmp_path / "g")
    monkeypatch.undo()
    assert len(load_grammar(tmp_path / "g")) == len(TOY)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]


def test_refuses_to_replace_a_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "precious.txt").write_text("x")
    with pytest.raises(ConfigurationError, match="not a grammar directory"):
        write_grammar(TOY, tmp_path / "d")
    assert (tmp_path / "d" / "precious.txt").read_text() == "x"


def test_truncated_array_names_the_file(tmp_path: Path) -> None:
    write_grammar(TOY, tmp_path / "g")
    f = tmp_path / "g" / "features.npy"
    f.write_bytes(f.read_bytes()[:-7])
    for verify in (True, False):
        with pytest.raises(DataFormatError, match=r"features\.npy") as info:
            load_grammar(tmp_path / "g", verify=verify)
        assert "truncated" in str(info.value)


def test_corrupted_array_names_the_file(tmp_path: Path) -> None:
    write_grammar(TOY, tmp_path / "g")
    f = tmp_path / "g" / "trie_keys.npy"
    data = bytearray(f.read_bytes())
    data[-3] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(DataFormatError, match=r"trie_keys\.npy.*checksum"):
        load_grammar(tmp_path / "g")


def test_corrupted_header_names_the_file_without_checksums(tmp_path: Path) -> None:
    write_grammar(TOY, tmp_path / "g")
    f = tmp_path / "g" / "rule_target.npy"
    data = bytearray(f.read_bytes())
    data[0:6] = b"NOTNPY"
    f.write_bytes(bytes(data))
    with pytest.raises(DataFormatError, match=r"rule_target\.npy.*unreadable"):
        load_grammar(tmp_path / "g", verify=False)


def test_missing_array_and_manifest(tmp_path: Path) -> None:
    write_grammar(TOY, tmp_path / "g")
    (tmp_path / "g" / "alignment.npy").unlink()
    with pytest.raises(DataFormatError, match=r"alignment\.npy.*missing"):
        load_grammar(tmp_path / "g")
    (tmp_path / "g" / "manifest.json").unlink()
    with pytest.raises(MissingResourceError, match=r"manifest\.json"):
        load_grammar(tmp_path / "g")
    with pytest.raises(MissingResourceError):
        load_grammar(tmp_path / "nowhere")


def test_manifest_version_is_checked(tmp_path: Path) -> None:
    write_grammar(TOY, tmp_path / "g")
    m = tmp_path / "g" / "manifest.json"
    data = json.loads(m.read_text())
    data["version"] = 99
    m.write_text(json.dumps(data))
    with pytest.raises(DataFormatError, match=r"manifest\.json.*version 99"):
        load_grammar(tmp_path / "g")
    m.write_text("{not json")
    with pytest.raises(DataFormatError, match="not valid JSON"):
        load_grammar(tmp_path / "g")


# --- filtering -------------------------------------------------------------------------------


def test_filter_hand_checked(toy: Grammar) -> None:
    toks = ["das", "haus", "über", "das"]
    sg = toy.filter(toks)
    das = toy.rules_for_source(["das"])
    das_x = toy.rules_for_source(["das", "[X,1]"])
    haus = toy.rules_for_source(["das", "haus"])
    ueber = toy.rules_for_source(["[X,1]", "über", "[X,2]"])
    # by hand: "das" at 0 and 3; "das haus" at 0-2; "das [X]" from 0 over 1..4;
    # "[X] über [X]": X1 in {0-2, 1-2}, X2 = 3-4
    expected = {(r, 0, 1, ()) for r in das} | {(r, 3, 4, ()) for r in das}
    expected |= {(r, 0, 2, ()) for r in haus}
    expected |= {(r, 0, e, ((1, e),)) for r in das_x for e in (2, 3, 4)}
    expected |= {(r, s, 4, ((s, 2), (3, 4))) for r in ueber for s in (0, 1)}
    assert sg.rule_match_set() == expected
    assert sg.matches(0, 1) == [Match(toy.pattern_id(["das"]) or 0, 0, 1, (), das)]
    assert sorted(sg.rule_matches(0, 4)) == sorted(
        [(r, ((1, 4),)) for r in das_x] + [(r, ((0, 2), (3, 4))) for r in ueber]
    )
    assert sg.spans() == [(0, 1), (0, 2), (0, 3), (0, 4), (1, 4), (3, 4)]
    assert sg.num_rules == len(expected)


def test_filter_gap_constraints(tmp_path: Path) -> None:
    rules = [
        R("[X,1] [X,2] a", "[X,2] [X,1] x"),  # adjacent gaps: never matches
        R("[X,1]", "[X,1]"),  # no terminal: never matches
        R("a [X,1] b", "ab [X,1]"),
        R("a [X,1] b [X,2] c", "[X,1] [X,2]"),
    ]
    write_grammar(rules, tmp_path / "g")
    g = load_grammar(tmp_path / "g")
    assert g.filter(["x", "a"]).rule_match_set() == set()
    gap1 = g.rules_for_source(["a", "[X,1]", "b"])[0]
    assert g.filter(["a", "b"]).rule_match_set() == set()  # a gap covers >= 1 word
    assert g.filter(["a", "x", "y", "b"]).rule_match_set() == {(gap1, 0, 4, ((1, 3),))}
    assert g.filter(["a", "x", "y", "b"], max_span=3).rule_match_set() == set()
    two = g.rules_for_source(["a", "[X,1]", "b", "[X,2]", "c"])[0]
    assert g.filter(["a", "x", "b", "y", "c"]).rule_match_set() == {
        (two, 0, 5, ((1, 2), (3, 4))),
        (gap1, 0, 3, ((1, 2),)),
    }
    with pytest.raises(InvalidInputError):
        g.filter(["a"], max_span=0)


def test_filter_unicode_and_unknown_words(toy: Grammar) -> None:
    sg = toy.filter(["grüße", "中文", "neu", "wort"])
    grusse = toy.rules_for_source(["grüße"])
    zh = toy.rules_for_source(["中文", "[X,1]"])
    assert sg.rule_match_set() == {(r, 0, 1, ()) for r in grusse} | {
        (r, 1, e, ((2, e),)) for r in zh for e in (3, 4)
    }
    assert len(toy.filter([])) == 0


@st.composite
def random_rules(draw: st.DrawFn) -> Rule:
    """Source sides of 1-5 symbols over 4 words and gaps, adjacent or gap-only ones included."""
    n = draw(st.integers(1, 5))
    source = [draw(st.sampled_from(["a", "b", "c", "ä", "G"])) for _ in range(n)]
    k = 0
    for i, s in enumerate(source):
        if s == "G":
            k += 1
            source[i] = f"[X,{k}]" if k <= 2 else "c"
    gaps = [s for s in source if s.startswith("[")]
    if draw(st.booleans()):
        gaps.reverse()
    return Rule("X", tuple(source), (*gaps, "t"), {"F": 1.0}, ())


@st.composite
def grammars_and_sentences(draw: st.DrawFn) -> tuple[list[Rule], list[str], int]:
    rules = draw(st.lists(random_rules(), max_size=25))
    sentence = draw(st.lists(st.sampled_from(["a", "b", "c", "ä", "z"]), max_size=12))
    return rules, sentence, draw(st.integers(1, 10))


@settings(max_examples=150, deadline=None)
@given(grammars_and_sentences())
def test_filter_equals_brute_force(tmp_path_factory: pytest.TempPathFactory, case: tuple) -> None:
    rules, sentence, max_span = case
    path = tmp_path_factory.mktemp("g")
    write_grammar(rules, path / "g")
    g = load_grammar(path / "g", verify=False)
    ref = reference_filter([(i, g.rule(i).source) for i in range(len(g))], sentence, max_span)
    assert g.filter(sentence, max_span).rule_match_set() == ref


def test_reference_filter_by_hand() -> None:
    got = reference_filter([(7, ("a", "[X,1]")), (8, ("[X,1]", "[X,2]"))], ["a", "b", "c"], 2)
    assert got == {(7, 0, 2, ((1, 2),))}


# --- cdec text format ------------------------------------------------------------------------


def test_parse_cdec_forms() -> None:
    r = parse_rule("[X] ||| [X] über [X] ||| [2] about [1] ||| A=1 0.5 x=y=-2.5 ||| 1-1 0-2")
    assert r.source == ("[X,1]", "über", "[X,2]")
    assert r.target == ("[X,2]", "about", "[X,1]")
    assert r.features == {"A": 1.0, "PhraseModel_0": 0.5, "x=y": -2.5}
    assert r.alignment == ((1, 1), (0, 2))


def test_parse_cdec_terminals_with_separators_and_equals() -> None:
    r = parse_rule("[X] ||| a|||b x=1 ||| = |||  |||")
    assert r.source == ("a|||b", "x=1")
    assert r.target == ("=",)
    assert r.features == {} and r.alignment == ()
    assert parse_rule(format_rule(r)) == r


def test_format_rule_styles() -> None:
    r = R("[X,1] über [X,2]", "[X,2] about [X,1]", {ARITY: 2.0, "Zero": 0.0}, "1-1")
    assert format_rule(r) == "[X] ||| [X,1] über [X,2] ||| [X,2] about [X,1] ||| Arity=2.0 ||| 1-1"
    assert format_rule(r, target_style="cdec").split(" ||| ")[2] == "[2] about [1]"


@pytest.mark.parametrize("bad", ["|||", "[1]", "[X]", "[X,3]"])
def test_export_refuses_ambiguous_terminals(tmp_path: Path, bad: str) -> None:
    rules = [R("a", "b"), Rule("X", ("a",), (bad,), {}, ())]
    with pytest.raises(DataFormatError, match=r"out\.txt:2.*cannot be written"):
        write_cdec(rules, tmp_path / "out.txt")
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize("suffix", ["txt", "txt.gz"])
@pytest.mark.parametrize("style", ["indexed", "cdec"])
def test_cdec_round_trip_is_lossless(toy: Grammar, tmp_path: Path, suffix: str, style: str) -> None:
    text = tmp_path / f"g.{suffix}"
    assert export_cdec(toy, text, target_style=style) == len(toy)  # type: ignore[arg-type]
    if suffix.endswith("gz"):
        with gzip.open(text, "rt", encoding="utf-8") as fh:
            assert sum(1 for _ in fh) == len(toy)
    back = import_cdec(text, tmp_path / "g2", feature_names=toy.feature_names)
    for name in toy.manifest["arrays"]:
        assert back.manifest["arrays"][name]["sha256"] == toy.manifest["arrays"][name]["sha256"]
    assert [key(r) for r in back.rules()] == [key(r) for r in toy.rules()]
    assert np.array_equal(back.features, toy.features)


def test_cdec_round_trip_of_awkward_float32_values(tmp_path: Path) -> None:
    vals = [0.1, -1e-30, 3.4028235e38, float("-inf"), 1 / 3, -123456.789]
    rules = [R(f"w{i}", "t", {"F": v}) for i, v in enumerate(vals)]
    write_grammar(rules, tmp_path / "g")
    export_cdec(tmp_path / "g", tmp_path / "g.txt")
    back = import_cdec(tmp_path / "g.txt", tmp_path / "g2")
    assert np.array_equal(back.features, load_grammar(tmp_path / "g").features)


def test_import_without_feature_names_orders_known_first(tmp_path: Path) -> None:
    (tmp_path / "g.txt").write_text(
        "[X] ||| a ||| b ||| Mine=1 LogPFgivenE=-1 ||| 0-0\n\n"
        "[X] ||| c ||| d ||| LogPEgivenF=-2 ||| 0-0\n",
        encoding="utf-8",
    )
    g = import_cdec(tmp_path / "g.txt", tmp_path / "g")
    assert g.feature_names == (LOG_P_E_GIVEN_F, LOG_P_F_GIVEN_E, "Mine")
    assert g.rule(0).features == {LOG_P_E_GIVEN_F: 0.0, LOG_P_F_GIVEN_E: -1.0, "Mine": 1.0}


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("[X] ||| a ||| b", "expected 4 or 5 fields"),
        ("X ||| a ||| b ||| ||| ", "left-hand side"),
        ("[X] ||| a ||| b ||| F=abc ||| ", "not a number"),
        ("[X] ||| a ||| b ||| F=1 F=2 ||| ", "given twice"),
        ("[X] ||| a ||| b ||| ||| 0-1", "outside"),
        ("[X] ||| a ||| b ||| ||| 0:0", "not i-j"),
        ("[X] ||| a [X,1] ||| b [2] ||| ||| ", "no source gap"),
        ("[X] ||| a [X,3] ||| b [3] ||| ||| ", "source gap"),
        ("[X] ||| a [1] ||| b [1] ||| ||| ", "must carry a label"),
        ("[X] ||| [X,1] a ||| b ||| ||| ", "target gaps"),  # refused by the binary format
        ("[X] ||| a ||| b ||| F=nan ||| ", "NaN"),
    ],
)
def test_malformed_cdec_lines_name_file_and_line(tmp_path: Path, line: str, reason: str) -> None:
    path = tmp_path / "g.txt"
    path.write_text(f"[X] ||| ok ||| fine ||| F=1 ||| 0-0\n{line}\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=reason) as info:
        import_cdec(path, tmp_path / "g")
    assert info.value.path == str(path) and info.value.line_no == 2
    assert not (tmp_path / "g").exists()


def test_malformed_cdec_lines_can_be_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "g.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("[X] ||| ok ||| fine ||| F=1 ||| 0-0\nbroken\n[X] ||| a ||| b ||| ||| 5-5\n")
    g = import_cdec(path, tmp_path / "g", on_error="skip")
    assert [r.source for r in g.rules()] == [("ok",)]
    assert "skipped 2 malformed line(s)" in capsys.readouterr().err


def test_non_utf8_line_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "g.txt"
    path.write_bytes(b"[X] ||| ok ||| fine ||| ||| \n[X] ||| \xff ||| b ||| ||| \n")
    with pytest.raises(DataFormatError, match="UTF-8") as info:
        list(read_cdec(path))
    assert info.value.line_no == 2


def test_builder_counts_and_feature_order() -> None:
    b = GrammarBuilder()
    b.add(R("a", "b", {"Z": 1.0, ARITY: 0.5}))
    assert len(b) == 1
    assert b.feature_names() == [ARITY, "Z"]
