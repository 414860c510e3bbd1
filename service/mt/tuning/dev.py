"""The k-best decoder of the tuning loop for a model bundle (Chen et al. 2017, Alg. 1).

:func:`bundle_kbest_decoder` returns the ``decode_kbest(weights)`` callable that
:func:`service.mt.tuning.loop.tune` calls once per iteration: it builds a decoder for the
weights (:class:`service.mt.decoder.Decoder` over the bundle's grammar and LM), decodes every
tokenised dev sentence to its +LM forest and extracts the unique k-best translations
(:func:`service.forest.kbest.unique_kbest`) under the same weights. The decoder is built directly
rather than through :meth:`ModelBundle.decoder`, whose cache is keyed by weights-version name
and would hand back a stale decoder for the many unnamed weight vectors of tuning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from service.errors import InvalidInputError
from service.forest.kbest import unique_kbest
from service.mt.bundle import ModelBundle
from service.mt.decoder import DecoderConfig
from service.records import Translation

# derivations examined per wanted string of a tuning k-best list
TUNING_DERIVATIONS = 100


def bundle_kbest_decoder(
    bundle: ModelBundle,
    sources: Sequence[Sequence[str]],
    k: int = 20,
    config: DecoderConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Callable[[Mapping[str, float]], list[list[Translation]]]:
    """``decode_kbest(weights)``: the unique ``k``-best list of every source sentence."""
    if not sources:
        raise InvalidInputError("no dev sentences to decode")
    for i, toks in enumerate(sources):
        if not toks:
            raise InvalidInputError(f"dev sentence {i} is empty; drop it from the dev set")
    sentences = [tuple(s) for s in sources]

    def decode_kbest(weights: Mapping[str, float]) -> list[list[Translation]]:
        w = dict(weights)
        decoder = bundle.make_decoder(w, config)
        out: list[list[Translation]] = []
        for i, toks in enumerate(sentences):
            forest = decoder.forest(toks)
            # a fixed number of derivations (not a time budget): the lists, and so the tuned
            # weights, must not depend on the machine's speed
            lists = unique_kbest(forest.hypergraph, w, k, max_derivations=TUNING_DERIVATIONS * k)
            out.append([d.translation() for d in lists])
            if progress is not None:
                progress(i + 1, len(sentences))
        return out

    return decode_kbest
