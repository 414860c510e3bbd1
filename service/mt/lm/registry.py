"""Language models by kind: the registry that bundles and the CLI load an LM through.

Production kinds only: the reference :class:`~service.mt.lm.reference.ArpaLM` is not one
(tests build it directly), so loading an LM by kind never imports it."""

from __future__ import annotations

from pathlib import Path

from service.errors import ConfigurationError
from service.mt.lm.kenlm_model import KenLM
from service.mt.lm.model import LanguageModel, NoLM

LANGUAGE_MODELS: dict[str, type[LanguageModel]] = {"kenlm": KenLM}


def load_language_model(path: str | Path | None, kind: str = "kenlm") -> LanguageModel:
    """Load an LM by kind (:data:`LANGUAGE_MODELS`); ``None`` gives :class:`NoLM`."""
    if path is None:
        return NoLM()
    try:
        cls = LANGUAGE_MODELS[kind]
    except KeyError:
        raise ConfigurationError(
            f"unknown language model kind {kind!r}; choose one of {sorted(LANGUAGE_MODELS)}"
        ) from None
    return cls(path)  # type: ignore[call-arg]
