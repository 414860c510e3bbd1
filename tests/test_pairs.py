"""Every fast algorithm and its reference, at a glance, checked.

The house rule (docs/layout.md): every fast path — compiled kernels, vectorised numpy,
caches — is tested against a slow, obviously correct reference. :data:`PAIRS` is the index of
those pairs: for each algorithm, the fast version, the reference and the test module that holds
them equal. The test checks the index rather than trusting it:

* both sides of every pair resolve (``module:qualified.name``), so a rename breaks the index;
* the comparison module exists, names both sides (or the engine names it switches between) and
  holds a test that says what it compares;
* every reference in ``service/`` — a public function or method whose name says it is one
  (``*_reference``, ``reference_*``, ``reference``) or a public name of a ``reference`` module —
  is listed: a new reference without its comparison test fails here;
* serving never imports a ``reference`` module (:mod:`tests.integration.test_import_graph`
  runs that).
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Pair:
    algorithm: str
    fast: str  # "module:qualified.name"
    reference: str
    test: str  # the module holding them equal, relative to the repository
    mentions: tuple[str, ...] = ()  # what the test names instead of the two bare names

    def names(self) -> tuple[str, ...]:
        return self.mentions or tuple(x.rpartition(".")[2].rpartition(":")[2]
                                      for x in (self.fast, self.reference))  # fmt: skip


PAIRS: tuple[Pair, ...] = (
    # --- translation: decoding, k-best, the language model
    Pair("cube pruning (+LM forest)", "service.mt.decoder.compiled:CompiledDecoder",
         "service.mt.decoder.reference:ReferenceDecoder", "tests/mt/test_compiled_decoder.py",
         ("CompiledDecoder", "reference")),
    Pair("unique k-best", "service.forest.kbest.compiled:unique_kbest_compiled",
         "service.forest.kbest.reference:unique_kbest_reference",
         "tests/forest/test_kbest_kernel.py", ('engine="reference"', "unique_kbest")),
    Pair("n-gram LM queries", "service.mt.lm.table:LmTable", "service.mt.lm.reference:ArpaLM",
         "tests/mt/lm/test_table.py"),
    Pair("grammar filter", "service.mt.grammar:Grammar.filter",
         "service.mt.grammar:reference_filter", "tests/mt/test_grammar.py",
         (".filter(", "reference_filter")),
    # --- training
    Pair("alignment symmetrisation", "service.mt.training.align:symmetrize",
         "service.mt.training.align:symmetrize_reference", "tests/mt/training/test_align.py"),
    Pair("rule extraction", "service.mt.training.extract:extract_rules",
         "service.mt.training.extract:extract_rules_reference",
         "tests/mt/training/test_extract.py"),
    # extract_rules counts and filters in one pass; the reference composes three steps
    Pair("rule extraction: sentence counts", "service.mt.training.extract:extract_rules",
         "service.mt.training.extract:sentence_counts_reference",
         "tests/mt/training/test_extract.py"),
    Pair("rule extraction: min-count filter", "service.mt.training.extract:extract_rules",
         "service.mt.training.extract:min_count_filter_reference",
         "tests/mt/training/test_extract.py"),
    Pair("lexical counts", "service.mt.training.lexical_counts:lexical_table_from_corpus",
         "service.mt.training.lexical_counts:lexical_counts_reference",
         "tests/mt/training/test_rule_features.py"),
    Pair("rule features", "service.mt.training.rule_features:estimate_features",
         "service.mt.training.rule_features:reference_rule_table",
         "tests/mt/training/test_rule_features.py"),
    Pair("in-domain probabilities", "service.mt.training.domain:domain_columns",
         "service.mt.training.domain:reference_domain_features",
         "tests/mt/training/test_domain.py", ("estimate_features", "reference_rule_table")),
    # --- retrieval
    Pair("BM25 top-k", "service.index.inverted:InvertedIndex.rank",
         "service.index.inverted:InvertedIndex.rank_reference", "tests/index/test_kernel.py",
         ("rank", "rank_reference")),
    Pair("BOW-FD ranking", "service.retrieval.bowfd.ranking:rank_sentence",
         "service.retrieval.bowfd.reference:reference_scores", "tests/retrieval/test_bowfd.py",
         ('engine="reference"', "reference_scores")),
    Pair("BOW-FD document bounds", "service.retrieval.bowfd.ranking:doc_bounds",
         "service.retrieval.bowfd.ranking:reference_bounds", "tests/retrieval/test_bowfd.py"),
    Pair("rank fusion (RRF, score mix)", "service.retrieval.fusion:Fusion.fuse",
         "service.retrieval.fusion:Fusion.fuse_reference", "tests/dense/test_fusion.py"),
    Pair("E5 encoder layers (ONNX Runtime)", "service.dense.e5_onnx:OnnxRunner",
         "service.dense.e5:E5Model.layers_reference", "tests/dense/test_e5.py"),
    Pair("dense MaxP search (int8)", "service.dense.kernels:doc_scores",
         "service.dense.kernels:doc_scores_reference", "tests/dense/test_kernels.py"),
    Pair("dense sign sketch (first pass)", "service.dense.sketch:sketch_scores",
         "service.dense.sketch:sketch_scores_reference", "tests/dense/test_sketch.py",
         ("sketch_scores(", '"reference")')),
    Pair("TR Levenshtein similarity", "service.retrieval.tr:levenshtein_similarity",
         "service.retrieval.tr:levenshtein_similarity_reference", "tests/retrieval/test_tr.py"),
    Pair("TR edit distance", "rapidfuzz.distance.Levenshtein:distance",
         "service.retrieval.tr:levenshtein_distance_reference", "tests/retrieval/test_tr.py",
         ("rapidfuzz", "levenshtein_distance_reference")),
    Pair("RM3 relevance model", "service.retrieval.feedback:relevance_model",
         "service.retrieval.feedback:relevance_model_reference",
         "tests/retrieval/test_feedback.py"),
    Pair("feedback interpolation", "service.retrieval.feedback:interpolate",
         "service.retrieval.feedback:interpolate_reference", "tests/retrieval/test_feedback.py"),
    # --- text and the page
    Pair("Moses tokenizer", "service.text.moses:FastMoses.tokenize",
         "service.text.moses:FastMoses.reference", "tests/text/test_moses.py",
         (".tokenize(", ".reference(")),
    Pair("compound splitting", "service.text.compounds:best_split",
         "service.text.compounds:best_split_reference", "tests/text/test_compounds.py"),
    Pair("edge posteriors (inside-outside)", "service.forest.inference:fast_edge_posteriors",
         "service.forest.inference:edge_posteriors", "tests/forest/test_restrict.py"),
    Pair("one-word positions", "service.forest.inference:single_positions",
         "service.forest.inference:covered_positions", "tests/forest/test_restrict.py"),
    Pair("translation alternatives", "service.retrieval.choices:word_options",
         "service.retrieval.choices:word_options", "tests/retrieval/test_choices.py",
         ('engine="reference"', "word_options")),
    Pair("snippet window", "service.api.snippets:best_window",
         "service.api.snippets:best_window_reference", "tests/api/test_snippets.py"),
)  # fmt: skip


def resolve(target: str) -> object:
    module, _, qualname = target.partition(":")
    obj: object = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.algorithm)
def test_both_sides_resolve_and_a_test_holds_them_equal(pair: Pair) -> None:
    assert callable(resolve(pair.fast)), pair.fast
    assert callable(resolve(pair.reference)), pair.reference
    path = ROOT / pair.test
    assert path.is_file(), f"{pair.algorithm}: no comparison module {pair.test}"
    source = path.read_text(encoding="utf-8")
    for name in pair.names():
        assert name in source, f"{pair.test} does not name {name!r} ({pair.algorithm})"
    tests = [
        node.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    ]
    assert tests, f"{pair.test} holds no test"


def declared_references() -> set[str]:
    """``module:qualname`` of every reference ``service/`` declares (see the docstring)."""
    found: set[str] = set()
    for path in sorted((ROOT / "service").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_reference_module = path.stem == "reference"
        for node in tree.body:
            named = isinstance(node, ast.FunctionDef | ast.ClassDef)
            name = node.name if isinstance(node, ast.FunctionDef | ast.ClassDef) else "_"
            if named and name[:1] != "_" and (in_reference_module or _says_reference(name)):
                found.add(f"{module}:{name}")
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and _says_reference(item.name):
                        found.add(f"{module}:{node.name}.{item.name}")
    return found


def _says_reference(name: str) -> bool:
    return name == "reference" or name.endswith("_reference") or name.startswith("reference_")


def test_every_reference_in_the_service_is_paired() -> None:
    listed = {p.reference for p in PAIRS}
    missing = sorted(declared_references() - listed)
    assert not missing, f"references without a pair in PAIRS: {missing}"
    assert len(listed) == len(PAIRS)  # one reference per pair


def test_the_index_fails_on_an_unpaired_reference(tmp_path: Path) -> None:
    """The check can fail: a reference it did not list is reported."""
    listed = {p.reference for p in PAIRS}
    fake = "service.retrieval.feedback:relevance_model_reference"
    assert fake in declared_references() and fake in listed
    assert sorted(declared_references() - (listed - {fake})) == [fake]
