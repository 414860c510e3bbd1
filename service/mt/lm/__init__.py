"""The n-gram language model: one concern per module, as KenLM's ``lm/`` keeps them (Heafield
2011, "KenLM: Faster and Smaller Language Model Queries").

The models, behind one stateful protocol (imported with the package; no numba):

* :mod:`.symbols`: ``<s>``, ``</s>``, ``<unk>`` and the one log10 -> ln conversion;
* :mod:`.model`: the protocol (:class:`LanguageModel`, :class:`NgramStructure`) and :class:`NoLM`;
* :mod:`.kenlm_model`: :class:`KenLM`, the decoder's model;
* :mod:`.reference`: :class:`ArpaLM`, the textbook backoff computation the tests compare with
  (loaded on first use of its name: serving never imports it);
* :mod:`.registry`: :func:`load_language_model` by kind (the production kinds);
* :mod:`.states`: the LM boundaries of +LM items, minimised as KenLM's chart states.

The LM table, the model as arrays for compiled code (loaded on first use of its names below,
so that importing the package does not import numba):

* :mod:`.read_arpa` (with its compiled scanner :mod:`.arpa_scan`): the one ARPA reader, for the
  table and for :class:`ArpaLM`;
* :mod:`.kernels`: the n-gram keys and the numba query kernels (:func:`logp10`, the structure
  queries);
* :mod:`.table`: :class:`LmTable`, the arrays;
* :mod:`.assemble`: the hash table with KenLM's blanks and the left-extension flags;
* :mod:`.verify`: the comparison with KenLM, bit for bit;
* :mod:`.cache`: :func:`build_lm_table` and :func:`load_lm_table`, cached beside the ARPA file.

Modules import each other downwards only (symbols < kernels < arpa_scan < read_arpa < table <
assemble < verify < cache; symbols < model < kenlm_model, reference < registry; model < states),
never this package, and share no private name.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from service.mt.lm.kenlm_model import KenLM
from service.mt.lm.model import LanguageModel, NgramStructure, NoLM, State
from service.mt.lm.registry import LANGUAGE_MODELS, load_language_model
from service.mt.lm.states import (
    EMPTY_TAIL,
    NO_STRUCTURE,
    Boundary,
    Combination,
    ContextScore,
    ContextTable,
    IdTail,
    Piece,
    StateScorer,
    charge,
    combine,
    combine_ids,
    estimate,
    finish,
    finish_ids,
    id_tail,
    sentence_logprob,
)
from service.mt.lm.symbols import BOS, EOS, LN10, UNK

if TYPE_CHECKING:
    from service.mt.lm.cache import TABLE_FORMAT, build_lm_table, cache_path, load_lm_table
    from service.mt.lm.kernels import SEED, backoff10, droppable, left_extends_ids, logp10, mix
    from service.mt.lm.reference import ArpaLM
    from service.mt.lm.table import LmTable

# names whose modules import numba, and the reference: loaded when first asked for
_LAZY = {
    "ArpaLM": "reference",
    "LmTable": "table",
    "TABLE_FORMAT": "cache",
    "build_lm_table": "cache",
    "cache_path": "cache",
    "load_lm_table": "cache",
    "SEED": "kernels",
    "backoff10": "kernels",
    "droppable": "kernels",
    "left_extends_ids": "kernels",
    "logp10": "kernels",
    "mix": "kernels",
}

__all__ = [
    "BOS",
    "EMPTY_TAIL",
    "EOS",
    "LANGUAGE_MODELS",
    "LN10",
    "NO_STRUCTURE",
    "SEED",
    "TABLE_FORMAT",
    "UNK",
    "ArpaLM",
    "Boundary",
    "Combination",
    "ContextScore",
    "ContextTable",
    "IdTail",
    "KenLM",
    "LanguageModel",
    "LmTable",
    "NgramStructure",
    "NoLM",
    "Piece",
    "State",
    "StateScorer",
    "backoff10",
    "build_lm_table",
    "cache_path",
    "charge",
    "combine",
    "combine_ids",
    "droppable",
    "estimate",
    "finish",
    "finish_ids",
    "id_tail",
    "left_extends_ids",
    "load_language_model",
    "load_lm_table",
    "logp10",
    "mix",
    "sentence_logprob",
]


def __getattr__(name: str) -> Any:
    """The names of :data:`_LAZY`, imported from their module on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
