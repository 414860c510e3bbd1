"""KenLM (Heafield 2011, "KenLM: Faster and Smaller Language Model Queries") behind the
stateful protocol of :class:`service.mt.lm.LanguageModel`: the decoder's language model.

KenLM's states are opaque to Python, so the n-gram structure that state minimisation needs
(Heafield 2011, §4.1; :class:`service.mt.lm.NgramStructure`) comes from the LM table of the same
ARPA file (:mod:`service.mt.lm.cache`), loaded on first use so that numba is imported only by
a decoder that minimises its states.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from service.errors import ConfigurationError, DataFormatError, MissingResourceError
from service.mt.lm.model import LanguageModel, NgramStructure, State
from service.mt.lm.symbols import LN10


class KenLM(LanguageModel):
    """KenLM (Heafield 2011) over the ``kenlm`` module; loads ARPA or KenLM binary files.

    States are ``kenlm.State`` objects: hashable and comparable by their words, minimised by
    KenLM to the words that can still matter (so more hypotheses recombine). A state is
    never mutated after it is returned.
    """

    def __init__(self, path: str | Path) -> None:
        import kenlm

        self.path = Path(path)
        if not self.path.is_file():
            raise MissingResourceError(f"{self.path}: language model file not found")
        config = kenlm.Config()
        config.arpa_complain = kenlm.ARPALoadComplain.NONE
        config.show_progress = False
        try:
            self._model: Any = kenlm.Model(str(self.path), config)
        except (OSError, RuntimeError) as exc:
            raise DataFormatError(
                self.path, None, f"KenLM cannot load this file as ARPA or KenLM binary: {exc}"
            ) from exc
        self._state_cls: Any = kenlm.State
        self.order = int(self._model.order)
        begin = kenlm.State()
        self._model.BeginSentenceWrite(begin)
        null = kenlm.State()
        self._model.NullContextWrite(null)
        self._begin = begin
        self._null = null

    def begin_state(self) -> State:
        return self._begin  # type: ignore[no-any-return]

    def null_state(self) -> State:
        return self._null  # type: ignore[no-any-return]

    def _score10(self, state: State, word: str) -> tuple[float, State]:
        out = self._state_cls()
        log10p = self._model.BaseScore(state, word, out)
        return float(log10p), out

    def state_logp(self, state: State, word: str) -> float:
        # the hot path of the decoder's LM cache misses: one KenLM call, same value as score()
        return float(self._model.BaseScore(state, word, self._state_cls())) * LN10

    def is_oov(self, word: str) -> bool:
        return word not in self._model

    def kenlm_sentence_score(
        self, words: Sequence[str], bos: bool = True, eos: bool = True
    ) -> float:
        """KenLM's own whole-sentence score (``Model.score``), converted to natural log."""
        return float(self._model.score(" ".join(words), bos=bos, eos=eos)) * LN10

    def structure(self) -> NgramStructure:
        """The LM table of the same ARPA file (:func:`service.mt.lm.load_lm_table`, not
        verified against KenLM), loaded on first use; ConfigurationError if ``path`` is not an
        ARPA file the table can read (e.g. a KenLM binary)."""
        table: NgramStructure | None = self.__dict__.get("_structure")
        if table is None:
            from service.mt.lm.cache import load_lm_table  # numba only when needed

            try:
                table = load_lm_table(self.path, verify=False)
            except (DataFormatError, MissingResourceError) as exc:
                raise ConfigurationError(
                    f"{self.path}: LM state minimisation needs the language model as an ARPA "
                    f"file, and this one cannot be read as one ({exc})"
                ) from exc
            self._structure = table
        return table
