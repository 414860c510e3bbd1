"""Source–target word links of a whole derivation, built from its rules' alignments.

PSQ (Ture et al. 2012, as used by Hieber & Riezler 2015, §5) needs, for each derivation of the
n-best list, which target words each source word produced. A Hiero rule stores the word alignment
between its own terminals as pairs ``(i, j)`` of positions in its source and target symbol sequences
(:mod:`service.mt.rules`). A derivation places every rule: the rule's source side covers the
hyperedge's span, with each gap ``[X,k]`` covering the span of tail ``k − 1``; its target
terminals land at known positions of the derivation's output string. Composing the two gives
the derivation's word alignment as ``(source position, target position)`` pairs in sentence
coordinates.

Edges that are not grammar rules: a pass-through edge (an unknown source word copied to the
output) links that word to its copy; glue and goal edges have no terminals and no links.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.forest.hypergraph import DerivationNode, Hypergraph
from service.mt.grammar import Grammar
from service.mt.rules import PASS_THROUGH, nt_index


@dataclass(frozen=True, slots=True)
class AlignedDerivation:
    """A derivation reduced to what PSQ needs: its model score, output and word links.

    ``links`` holds ``(i, j)`` pairs: source word ``i`` of the sentence is aligned to
    ``target[j]``.
    """

    score: float
    target: tuple[str, ...]
    links: tuple[tuple[int, int], ...]


class RuleLinks:
    """Per-rule source sides (gap numbers or terminals) and alignments, cached by rule id."""

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        self._cache: dict[int, tuple[tuple[int, ...], tuple[tuple[int, int], ...]]] = {}

    def get(self, rule_id: int) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
        """``(source, alignment)``: ``source[i]`` is ``k`` for a gap ``[X,k]``, 0 for a
        terminal; ``alignment`` the rule's ``(source position, target position)`` pairs."""
        hit = self._cache.get(rule_id)
        if hit is None:
            g = self.grammar
            source = tuple(nt_index(s) for s in g.source_pattern(g.pattern_of(rule_id)))
            lo, hi = int(g.alignment_offsets[rule_id]), int(g.alignment_offsets[rule_id + 1])
            align = tuple((int(a), int(b)) for a, b in g.alignment[lo:hi])
            hit = (source, align)
            if len(self._cache) > 500_000:
                self._cache.clear()
            self._cache[rule_id] = hit
        return hit


def derivation_links(
    hg: Hypergraph, tree: DerivationNode, rules: RuleLinks
) -> tuple[tuple[str, ...], tuple[tuple[int, int], ...]]:
    """The output string of ``tree`` and its word alignment in sentence coordinates."""
    out: list[str] = []
    links: list[tuple[int, int]] = []

    def visit(node: DerivationNode) -> None:
        edge = hg.edges[node.edge]
        target_pos: dict[int, int] = {}
        for j, sym in enumerate(edge.target):
            if isinstance(sym, str):
                target_pos[j] = len(out)
                out.append(sym)
            else:
                visit(node.children[sym])
        if edge.rule_id >= 0:
            source, align = rules.get(edge.rule_id)
            source_pos: dict[int, int] = {}
            cur = edge.span[0]
            for i, k in enumerate(source):
                if k:
                    cur = hg.nodes[edge.tails[k - 1]].span[1]
                else:
                    source_pos[i] = cur
                    cur += 1
            for i, j in align:
                if i in source_pos and j in target_pos:
                    links.append((source_pos[i], target_pos[j]))
        elif PASS_THROUGH in edge.features and not edge.tails and target_pos:
            for j in target_pos.values():
                links.append((edge.span[0], j))

    visit(tree)
    return tuple(out), tuple(sorted(links))


def aligned_derivation(
    hg: Hypergraph, tree: DerivationNode, score: float, rules: RuleLinks
) -> AlignedDerivation:
    target, links = derivation_links(hg, tree, rules)
    return AlignedDerivation(score, target, links)
