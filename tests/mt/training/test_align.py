"""Word alignment: symmetrisation on hand-drawn matrices, fast == reference, eflomal for real.

Matrices are drawn with source positions i as rows and target positions j as columns:
``F`` = forward link only, ``R`` = reverse link only, ``B`` = both (the intersection),
``.`` = no link.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.errors import (
    ClirError,
    ConfigurationError,
    DataFormatError,
    InvalidInputError,
    MissingResourceError,
)
from service.mt.training.align import (
    SYMMETRIZATION_METHODS,
    Alignments,
    _read_links,
    align_corpus,
    symmetrize,
    symmetrize_reference,
)

Links = set[tuple[int, int]]


def parse_matrix(drawing: str) -> tuple[Links, Links, int, int]:
    """Forward links, reverse links, source length, target length of a drawn matrix."""
    rows = drawing.split()
    fwd = {(i, j) for i, row in enumerate(rows) for j, c in enumerate(row) if c in "FB"}
    rev = {(i, j) for i, row in enumerate(rows) for j, c in enumerate(row) if c in "RB"}
    return fwd, rev, len(rows), len(rows[0])


def run_fast(fwd: Links, rev: Links, m: int, n: int, method: str) -> Links:
    """The corpus-level symmetrize() on a one-sentence corpus (framed by two other sentences)."""
    other = [(0, 0)]
    f = Alignments.from_links([other, fwd, other], [1, m, 1], [1, n, 1])
    r = Alignments.from_links([other, rev, other], [1, m, 1], [1, n, 1])
    out = symmetrize(f, r, method)
    assert out[0].tolist() == [[0, 0]] and out[2].tolist() == [[0, 0]]
    return {(i, j) for i, j in out[1].tolist()}


def run_reference(fwd: Links, rev: Links, m: int, n: int, method: str) -> Links:
    return symmetrize_reference(fwd, rev, m, n, method)


IMPLEMENTATIONS = [run_reference, run_fast]

# --- hand-made cases --------------------------------------------------------------------------

# Case "and": a union point with one side already aligned is added by grow-diag-final but
# NOT by grow-diag-final-and; a union point with both sides free is added by both.
#
#        j: 0 1 2 3 4
#   i=0     B . . R .     (0,3) R: source 0 aligned, target 3 free  -> final only
#   i=1     . . . . .
#   i=2     . . B . .     no union point touches (0,0) or (2,2), so growing adds nothing
#   i=3     F . . . .     (3,0) F: source 3 free, target 0 aligned  -> final only
#   i=4     . . . . F     (4,4) F: both free (not a neighbour of (2,2)) -> final and final-and
CASE_AND = """
B..R.
.....
..B..
F....
....F
"""
CASE_AND_EXPECTED = {
    "intersection": {(0, 0), (2, 2)},
    "union": {(0, 0), (0, 3), (2, 2), (3, 0), (4, 4)},
    "grow-diag": {(0, 0), (2, 2)},
    "grow-diag-final": {(0, 0), (0, 3), (2, 2), (3, 0), (4, 4)},
    "grow-diag-final-and": {(0, 0), (2, 2), (4, 4)},
}

# Case "order": growing order decides the result.
#
#        j: 0 1 2
#   i=0     B . .
#   i=1     . F R
#   i=2     . . B
#
# Row-major scan, round 1: at (0,0) the diagonal neighbour (1,1) is in the union and source 1
# is free -> add (1,1); now every word is aligned. (1,1) -> (1,2): source 1 and target 2 are
# aligned -> no. (2,2) -> (1,2): same -> no. Round 2 adds nothing; the final steps add nothing
# (both words of (1,2) are aligned). Had growth started from (2,2), (1,2) would come first
# (source 1 free) and then (1,1) (target 1 still free): four points instead of three.
CASE_ORDER = """
B..
.FR
..B
"""
CASE_ORDER_EXPECTED = {
    "intersection": {(0, 0), (2, 2)},
    "union": {(0, 0), (1, 1), (1, 2), (2, 2)},
    "grow-diag": {(0, 0), (1, 1), (2, 2)},
    "grow-diag-final": {(0, 0), (1, 1), (2, 2)},
    "grow-diag-final-and": {(0, 0), (1, 1), (2, 2)},
}

# Case "rounds": a point added behind the scan grows only in the next round.
#
#        j: 0 1 2 3
#   i=0     . . F .
#   i=1     . . F .
#   i=2     . . B .
#   i=3     R . . .
#
# Round 1: (2,2) -> up (1,2): source 1 free -> add (row 1 is already scanned). Round 2: (1,2)
# -> up (0,2): source 0 free -> add. Round 3: nothing. (3,0) is not a neighbour of any point:
# final-and adds it (source 3 and target 0 free).
CASE_ROUNDS = """
..F.
..F.
..B.
R...
"""
CASE_ROUNDS_EXPECTED = {
    "intersection": {(2, 2)},
    "union": {(0, 2), (1, 2), (2, 2), (3, 0)},
    "grow-diag": {(0, 2), (1, 2), (2, 2)},
    "grow-diag-final": {(0, 2), (1, 2), (2, 2), (3, 0)},
    "grow-diag-final-and": {(0, 2), (1, 2), (2, 2), (3, 0)},
}

# Case "final order": empty intersection, so nothing grows; the final step visits the forward
# links before the reverse ones.
#
#        j: 0 1
#   i=0     F R
#   i=1     . .
#
# final-and: (0,0) F, both free -> add; (0,1) R, source 0 now aligned -> not added.
# final: (0,1) still has target 1 free -> added. (Reverse first would give {(0,1)}.)
CASE_FINAL_ORDER = """
FR
..
"""
CASE_FINAL_ORDER_EXPECTED = {
    "intersection": set(),
    "union": {(0, 0), (0, 1)},
    "grow-diag": set(),
    "grow-diag-final": {(0, 0), (0, 1)},
    "grow-diag-final-and": {(0, 0)},
}

# Case "diagonal and one-to-many": a German compound against two English words plus a word
# reachable only diagonally.
#
#   src: das(0) hausdach(1) ist(2) rot(3)     tgt: the(0) house(1) roof(2) is(3) red(4)
#
#        j: 0 1 2 3 4
#   i=0     B . . . .
#   i=1     . B R . .     (1,2) R: right of (1,1); source 1 aligned, target 2 free -> grow
#   i=2     . . . . .     (2,3) absent: "ist" stays unaligned in every method but union
#   i=3     . . . F B     (3,3) F: left of (3,4); target 3 free -> grow
#
# Round 1: (0,0) -> nothing in the union. (1,1) -> (0,1)? no, (1,0)? no, (2,1)? no,
# (1,2) yes -> add. (1,2) -> no new union neighbours. (3,4) -> (2,4) no, (3,3) yes -> add.
# Round 2 adds nothing. Here every method but intersection gives the union.
CASE_COMPOUND = """
B....
.BR..
.....
...FB
"""
CASE_COMPOUND_EXPECTED = {
    "intersection": {(0, 0), (1, 1), (3, 4)},
    "union": {(0, 0), (1, 1), (1, 2), (3, 3), (3, 4)},
    "grow-diag": {(0, 0), (1, 1), (1, 2), (3, 3), (3, 4)},
    "grow-diag-final": {(0, 0), (1, 1), (1, 2), (3, 3), (3, 4)},
    "grow-diag-final-and": {(0, 0), (1, 1), (1, 2), (3, 3), (3, 4)},
}

# Case "diagonal only": (1,1) touches the intersection only diagonally, (1,0)/(0,1) are not in
# the union; grow-diag adds it (both words free).
#
#        j: 0 1 2
#   i=0     B . .
#   i=1     . R .
#   i=2     . . .
CASE_DIAGONAL = """
B..
.R.
...
"""
CASE_DIAGONAL_EXPECTED = {
    "intersection": {(0, 0)},
    "union": {(0, 0), (1, 1)},
    "grow-diag": {(0, 0), (1, 1)},
    "grow-diag-final": {(0, 0), (1, 1)},
    "grow-diag-final-and": {(0, 0), (1, 1)},
}

HAND_CASES = {
    "and": (CASE_AND, CASE_AND_EXPECTED),
    "order": (CASE_ORDER, CASE_ORDER_EXPECTED),
    "rounds": (CASE_ROUNDS, CASE_ROUNDS_EXPECTED),
    "final-order": (CASE_FINAL_ORDER, CASE_FINAL_ORDER_EXPECTED),
    "compound": (CASE_COMPOUND, CASE_COMPOUND_EXPECTED),
    "diagonal": (CASE_DIAGONAL, CASE_DIAGONAL_EXPECTED),
}


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=["reference", "fast"])
@pytest.mark.parametrize("method", list(SYMMETRIZATION_METHODS))
@pytest.mark.parametrize("case", list(HAND_CASES))
def test_symmetrize_hand_cases(case, method, impl):
    drawing, expected = HAND_CASES[case]
    fwd, rev, m, n = parse_matrix(drawing)
    assert impl(fwd, rev, m, n, method) == expected[method]


def test_the_drawings_parse_as_intended():
    fwd, rev, m, n = parse_matrix(CASE_ORDER)
    assert (m, n) == (3, 3)
    assert fwd == {(0, 0), (1, 1), (2, 2)}
    assert rev == {(0, 0), (1, 2), (2, 2)}


# --- fast == reference on random alignments ---------------------------------------------------


@st.composite
def random_sentence(draw):
    m = draw(st.integers(0, 7))
    n = draw(st.integers(0, 7))
    cells = [(i, j) for i in range(m) for j in range(n)]
    # dense enough that growing and both final steps all happen
    fwd = {c for c in cells if draw(st.integers(0, 3)) == 0}
    rev = {c for c in cells if draw(st.integers(0, 3)) == 0}
    if cells and draw(st.booleans()):
        shared = {c for c in cells if draw(st.integers(0, 4)) == 0}
        fwd |= shared
        rev |= shared
    return fwd, rev, m, n


@settings(max_examples=150, deadline=None, database=None)
@given(st.lists(random_sentence(), min_size=1, max_size=6))
def test_fast_equals_reference_on_random_alignments(sentences):
    src_lens = [m for _, _, m, _ in sentences]
    tgt_lens = [n for _, _, _, n in sentences]
    fwd = Alignments.from_links([f for f, _, _, _ in sentences], src_lens, tgt_lens)
    rev = Alignments.from_links([r for _, r, _, _ in sentences], src_lens, tgt_lens)
    results = {method: symmetrize(fwd, rev, method) for method in SYMMETRIZATION_METHODS}
    for k, (f, r, m, n) in enumerate(sentences):
        got = {}
        for method, out in results.items():
            got[method] = {(i, j) for i, j in out[k].tolist()}
            assert got[method] == symmetrize_reference(f, r, m, n, method), (method, k)
        # invariants of the definition, independent of either implementation
        assert got["intersection"] == f & r
        assert got["union"] == f | r
        assert got["intersection"] <= got["grow-diag"]
        # (not gdfa <= gdf: a point gdf adds early can block one that gdfa adds later)
        assert got["grow-diag"] <= got["grow-diag-final-and"] <= got["union"]
        assert got["grow-diag"] <= got["grow-diag-final"] <= got["union"]


# --- the Alignments container -----------------------------------------------------------------


def test_alignments_sorts_and_indexes():
    a = Alignments.from_links([[(1, 0), (0, 1), (1, 0)], [], [(0, 0)]], [2, 0, 1], [2, 3, 1])
    assert len(a) == 3
    assert a[0].tolist() == [[0, 1], [1, 0]]
    assert a[1].shape == (0, 2)
    assert a[-1].tolist() == [[0, 0]]
    assert a.pharaoh(0) == "0-1 1-0"
    assert [x.tolist() for x in a] == [[[0, 1], [1, 0]], [], [[0, 0]]]
    with pytest.raises(IndexError):
        a[3]


def test_alignments_save_load_round_trip(tmp_path):
    a = Alignments.from_links([[(0, 0), (1, 2)], [], [(3, 1)]], [2, 1, 4], [3, 0, 2])
    path = tmp_path / "sub" / "fwd.npz"
    a.save(path)
    b = Alignments.load(path)
    assert b == a
    assert b.src_lens.tolist() == [2, 1, 4] and b.tgt_lens.tolist() == [3, 0, 2]
    assert [p.name for p in path.parent.iterdir()] == ["fwd.npz"]  # no temporary left over


def test_alignments_reject_links_outside_the_sentence():
    with pytest.raises(InvalidInputError, match=r"sentence 1 has the link 2-0 outside"):
        Alignments.from_links([[(0, 0)], [(2, 0)]], [1, 2], [1, 1])
    with pytest.raises(InvalidInputError, match="offsets"):
        Alignments(np.zeros((2, 2)), [0, 1], [1], [1])
    with pytest.raises(InvalidInputError, match="not sorted"):
        Alignments([[1, 0], [0, 0]], [0, 2], [2], [1])


def test_load_damaged_or_missing_file(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(DataFormatError, match=r"bad\.npz"):
        Alignments.load(bad)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    with pytest.raises(DataFormatError, match="not an alignment file"):
        Alignments.load(other)
    with pytest.raises(MissingResourceError, match=r"missing\.npz"):
        Alignments.load(tmp_path / "missing.npz")


def test_symmetrize_rejects_mismatched_inputs():
    f = Alignments.from_links([[(0, 0)], [(0, 0)]], [1, 1], [1, 1])
    with pytest.raises(InvalidInputError, match="forward alignments have 2 sentences, reverse 1"):
        symmetrize(f, Alignments.from_links([[(0, 0)]], [1], [1]))
    r = Alignments.from_links([[(0, 0)], [(0, 0)]], [1, 2], [1, 1])
    with pytest.raises(InvalidInputError, match=r"sentence 1 has lengths 1×1 .* but 2×1"):
        symmetrize(f, r)
    with pytest.raises(ConfigurationError, match="grow-diag-final-and"):
        symmetrize(f, f, "grow-final")
    with pytest.raises(ConfigurationError, match="unknown symmetrisation method"):
        symmetrize_reference(set(), set(), 1, 1, "grow")


def test_read_links_detects_truncated_eflomal_output(tmp_path):
    lens = np.array([2, 2, 2], dtype=np.int32)
    out = tmp_path / "links"
    out.write_text("0-0 1-1\n1-0\n")
    with pytest.raises(ClirError, match="2 lines of forward links for 3 sentence pairs"):
        _read_links(out, lens, lens, "forward")
    out.write_text("0-0 1-1\n1-0\n0-5\n")
    with pytest.raises(DataFormatError, match="does not fit the corpus"):
        _read_links(out, lens, lens, "forward")
    out.write_text("1-1 0-0\n\n1-0 0-1\n")
    assert [x.tolist() for x in _read_links(out, lens, lens, "forward")] == [
        [[0, 0], [1, 1]],
        [],
        [[0, 1], [1, 0]],
    ]


# --- eflomal, for real ------------------------------------------------------------------------

NOUNS = {"haus": "house", "auto": "car", "buch": "book", "hund": "dog", "baum": "tree"}
ADJECTIVES = {"rote": "red", "große": "big", "alte": "old", "neue": "new"}


def toy_corpus() -> list[tuple[list[str], list[str]]]:
    """~200 repetitive pairs; the nouns and adjectives vary independently of everything else."""
    rng = random.Random(7)
    pairs = []
    for k in range(200):
        noun, adj = rng.choice(sorted(NOUNS)), rng.choice(sorted(ADJECTIVES))
        if k % 2:
            # das rote haus ist hier / the red house is here: adj at 1↔1, noun at 2↔2
            pairs.append(
                (
                    ["das", adj, noun, "ist", "hier"],
                    ["the", ADJECTIVES[adj], NOUNS[noun], "is", "here"],
                )
            )
        else:
            # ich sehe haus / i can see the house: noun at source 2, target 4
            pairs.append((["ich", "sehe", noun], ["i", "can", "see", "the", NOUNS[noun]]))
    return pairs


@pytest.mark.parametrize(
    "pairs, message",
    [
        ([], "corpus is empty"),
        ([(["a"], [])], "every target sentence of the corpus is empty"),
        ([(["a"], ["b"]), ("a b", ["a", "b"])], "pair 1: the source side must be a list"),
        ([(["a"], ["b"]), (["a"],)], r"pair 1: expected \(source_tokens, target_tokens\)"),
        ([(["a"] * 1024, ["b"])], "1024 source tokens, eflomal aligns at most 1023"),
    ],
)
def test_align_corpus_bad_input(pairs, message):
    with pytest.raises(InvalidInputError, match=message):
        align_corpus(pairs)


def test_align_corpus_bad_options():
    with pytest.raises(ConfigurationError, match="model must be 1, 2 or 3"):
        align_corpus([(["a"], ["b"])], model=4)
    with pytest.raises(ConfigurationError, match="n_iterations"):
        align_corpus([(["a"], ["b"])], n_iterations=(0, 1, 1))
