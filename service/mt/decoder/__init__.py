"""The SCFG decoder: CKY+ parsing of a source sentence with the Hiero grammar and
language-model integration by cube pruning (Chiang 2007, §5; Hieber & Riezler 2015, §3), into
the +LM forest that every retrieval method reads.

One algorithm, two engines, chosen by name (``DecoderConfig.engine``) in :data:`DECODERS`:

* :mod:`.base`: what both share — :class:`DecoderConfig`, :class:`Forest`,
  :class:`DecodeStats`, the abstract :class:`Decoder` (rule scores, yields and features, the
  sentence grammar, the input checks, the −LM forest);
* :mod:`.reference`: :class:`ReferenceDecoder`, the search in Python, obviously correct and
  the one the tests compare with;
* :mod:`.compiled`: :class:`CompiledDecoder`, the same search as one numba kernel per sentence
  (:mod:`.kernel`), node for node and edge for edge the reference's forest — what serving runs.

The engines' modules are imported when first asked for (:func:`decoder_class`, or their class
names from this package), so importing the package imports neither numba nor the reference;
serving never imports the reference (tests/integration/test_import_graph.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from service.core.jit import Engine
from service.errors import ConfigurationError
from service.mt.decoder.base import (
    TOP,
    Decoder,
    DecoderConfig,
    DecodeStats,
    Forest,
    Span,
    YieldSym,
    weighted_rule_scores,
)

if TYPE_CHECKING:
    from service.mt.decoder.compiled import CompiledDecoder
    from service.mt.decoder.reference import ReferenceDecoder

# engine name -> "module:class", imported on first use
DECODERS: dict[str, str] = {
    "compiled": "service.mt.decoder.compiled:CompiledDecoder",
    "reference": "service.mt.decoder.reference:ReferenceDecoder",
}


def decoder_class(engine: str) -> type[Decoder]:
    """The decoder class of ``engine`` (its module imported now); an unknown name lists the
    valid ones."""
    target = DECODERS.get(engine)
    if target is None:
        raise ConfigurationError(
            f"unknown decoder engine {engine!r}; choose one of: {', '.join(sorted(DECODERS))}"
        )
    module, _, name = target.partition(":")
    cls: type[Decoder] = getattr(importlib.import_module(module), name)
    return cls


def __getattr__(name: str) -> Any:
    """:class:`CompiledDecoder` and :class:`ReferenceDecoder`, their modules loaded when first
    asked for."""
    for target in DECODERS.values():
        module, _, attr = target.partition(":")
        if attr == name:
            return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DECODERS",
    "TOP",
    "CompiledDecoder",
    "DecodeStats",
    "Decoder",
    "DecoderConfig",
    "Engine",
    "Forest",
    "ReferenceDecoder",
    "Span",
    "YieldSym",
    "decoder_class",
    "weighted_rule_scores",
]
