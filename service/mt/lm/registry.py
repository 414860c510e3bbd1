"""Language models by kind: the registry that bundles and the CLI load an LM through."""

from __future__ import annotations

from pathlib import Path

from service.errors import ConfigurationError
from service.mt.lm.kenlm_model import KenLM
from service.mt.lm.model import LanguageModel, NoLM
from service.mt.lm.reference import ArpaLM

LANGUAGE_MODELS: dict[str, type[LanguageModel]] = {"kenlm": KenLM, "arpa": ArpaLM}


def load_language_model(path: str | Path | None, kind: str = "kenlm") -> LanguageModel:
    """Load an LM by kind (``kenlm`` or ``arpa``); ``None`` gives :class:`NoLM`."""
    if path is None:
        return NoLM()
    try:
        cls = LANGUAGE_MODELS[kind]
    except KeyError:
        raise ConfigurationError(
            f"unknown language model kind {kind!r}; choose one of {sorted(LANGUAGE_MODELS)}"
        ) from None
    return cls(path)  # type: ignore[call-arg]
