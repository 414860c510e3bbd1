"""The held-out protocol of learning to rank: grouped folds, rounds, hold-out and the pooled
comparison on a toy set worked by hand."""

from __future__ import annotations

import math

import pytest

from service.errors import InvalidInputError
from service.ltr.protocol import (
    compare_runs,
    cv_rounds,
    grouped_folds,
    holdout_split,
    linked_groups,
    page_groups,
)


def toy_qrels() -> dict[str, dict[str, int]]:
    # q1's page links both ways with q2's (2); q3 links one way to q1's page (1); q4, q5 alone;
    # q6 is a second query of q5's page.
    return {
        "q1": {"p1": 3, "p2": 2, "x": 1},
        "q2": {"p2": 3, "p1": 2},
        "q3": {"p3": 3, "p1": 1},
        "q4": {"p4": 3},
        "q5": {"p5": 3, "y": 1},
        "q6": {"p5": 3},
    }


def test_page_groups_are_the_documents_judged_3() -> None:
    groups = page_groups(toy_qrels())
    assert groups == {"q1": "p1", "q2": "p2", "q3": "p3", "q4": "p4", "q5": "p5", "q6": "p5"}
    assert page_groups({"q": {"d": 1, "c": 1, "e": 0}}) == {"q": "c"}  # highest, smallest id
    assert page_groups({"q": {"d": 0}}) == {"q": "query:q"}


def test_linked_groups_join_pages_judged_at_the_level() -> None:
    qrels = toy_qrels()
    two = linked_groups(qrels, min_level=2)
    assert two["q1"] == two["q2"] == "p1"  # mutual links
    assert two["q3"] == "p3"  # a one-way link (1) does not join at level 2
    one = linked_groups(qrels, min_level=1)
    assert one["q1"] == one["q2"] == one["q3"] == "p1"
    assert one["q5"] == one["q6"] == "p5" and one["q4"] == "p4"


def test_grouped_folds_keep_groups_whole_and_every_query_once() -> None:
    groups = {f"q{i}": f"g{i // 3}" for i in range(40)}  # 14 groups of up to 3 queries
    for k in (2, 3, 5):
        folds = grouped_folds(groups, k)
        flat = [q for f in folds for q in f]
        assert sorted(flat) == sorted(groups)  # every query, and only once
        assert len(flat) == len(set(flat))
        fold_of = {q: j for j, f in enumerate(folds) for q in f}
        for q, g in groups.items():  # a group never straddles folds
            assert all(fold_of[o] == fold_of[q] for o, h in groups.items() if h == g)
        sizes = [len(f) for f in folds]
        assert max(sizes) - min(sizes) <= 3  # balanced up to the largest group
    assert grouped_folds(groups, 5) == grouped_folds(dict(reversed(groups.items())), 5)
    assert grouped_folds(groups, 5, salt="a") != grouped_folds(groups, 5, salt="b")
    with pytest.raises(InvalidInputError, match="groups cannot fill"):
        grouped_folds({"a": "g", "b": "g"}, 2)
    with pytest.raises(InvalidInputError, match="at least 2 folds"):
        grouped_folds(groups, 1)


def test_cv_rounds_train_stop_and_test_are_disjoint_and_test_covers_all() -> None:
    folds = [["a", "b"], ["c"], ["d", "e"], ["f"]]
    rounds = cv_rounds(folds)
    assert rounds[0].test == ("a", "b") and rounds[0].stop == ("c",)
    assert rounds[0].train == ("d", "e", "f")
    assert rounds[3].test == ("f",) and rounds[3].stop == ("a", "b")
    assert rounds[3].train == ("c", "d", "e")
    for r in rounds:
        assert not set(r.train) & set(r.stop) and not set(r.train) & set(r.test)
        assert not set(r.stop) & set(r.test)
    assert sorted(q for r in rounds for q in r.test) == list("abcdef")
    with pytest.raises(InvalidInputError, match="at least 3 folds"):
        cv_rounds(folds[:2])


def test_holdout_keeps_groups_whole() -> None:
    groups = {f"q{i}": f"g{i // 2}" for i in range(20)}
    kept, held = holdout_split(groups, 0.25)
    assert sorted(kept + held) == sorted(groups) and not set(kept) & set(held)
    assert 5 <= len(held) <= 6  # whole pairs until at least a quarter
    held_groups = {groups[q] for q in held}
    assert not any(groups[q] in held_groups for q in kept)
    kept2, held2 = holdout_split({"a": "g1", "b": "g2"}, 0.9)
    assert len(kept2) == 1 and len(held2) == 1  # one group is always kept
    with pytest.raises(InvalidInputError, match="at least 2 groups"):
        holdout_split({"a": "g", "b": "g"}, 0.5)


def test_compare_runs_on_a_toy_set_by_hand() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    learned = {"q1": {"a": 3.0, "x": 2.0}, "q2": {"b": 3.0, "x": 1.0}, "q3": {"c": 9.0}}
    # default: the relevant document at rank 2, 2 and 3 -> AP 1/2, 1/2, 1/3
    default = {
        "q1": {"x": 3.0, "a": 2.0},
        "q2": {"x": 3.0, "b": 1.0},
        "q3": {"x": 3.0, "y": 2.0, "c": 1.0},
    }
    out = compare_runs(learned, default, qrels, permutations=20_000)
    assert out["queries"] == 3
    assert out["map_learned"] == pytest.approx(1.0)
    assert out["map_default"] == pytest.approx((0.5 + 0.5 + 1 / 3) / 3)
    assert out["map_gain"] == pytest.approx(1.0 - 4 / 9)
    # differences (1/2, 1/2, 2/3): of the 8 sign patterns only all-plus and all-minus reach
    # the observed |mean|, so the exact two-sided p is 2/8
    assert out["p_map"] == pytest.approx(0.25, abs=0.01)
    # detectable = (z_.975 + z_.8) · sd / √3, sd of (1/2, 1/2, 2/3) with ddof 1
    mean = 5 / 9
    sd = math.sqrt(((0.5 - mean) ** 2 * 2 + (2 / 3 - mean) ** 2) / 2)
    assert out["detectable"] == pytest.approx((1.959964 + 0.841621) * sd / math.sqrt(3), rel=1e-5)
    assert out["detectable_p01"] > out["detectable"]
    # a query missing from the learned run scores 0 there
    missing = compare_runs({"q1": learned["q1"]}, default, qrels, permutations=100)
    assert missing["map_learned"] == pytest.approx(1 / 3)
    with pytest.raises(InvalidInputError, match="at least 2 queries"):
        compare_runs(learned, default, qrels, ["q1"])
