"""Weights versions the service can serve: validation before activation, and activation.

Every way of activating a version (``POST /v1/admin/models/{version}/activate``, ``clir weights
--activate``, ``clir train-ltr --activate`` and the training job with ``activate``) goes
through :func:`activate_version`, which checks the version before it moves the bundle's active
pointer, so that a version that would make searches fail is refused while the active one keeps
serving:

1. the file parses (an object of finite weights; :class:`~service.errors.DataFormatError`
   otherwise) and names only features this bundle can compute — its manifest's, the SMT
   features, ``IR_BM25``, per-term IR (``ir:``) and LEX (``lex:``/``ins:``/``del:``) features;
   refused as :class:`~service.errors.InvalidInputError` (HTTP 422);
2. with a document index at hand, a probe query (a few source words of the version's LEX
   features or of the grammar) is decoded with the version's weights and ranked by every
   document method, constructed as the service constructs them
   (:func:`service.retrieval.runner.make_scorer`); a failure is refused as
   :class:`~service.errors.ConflictError` (HTTP 409): the file is well formed, but this service
   cannot score with it;
3. a learning-to-rank version that was not offered for activation (its metrics say
   ``activation_offered = 0``: it did not gain on the held-out queries, :mod:`service.ltr.task`)
   is refused as :class:`~service.errors.ConflictError` unless ``force`` is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.errors import (
    ClirError,
    ConflictError,
    DataFormatError,
    InvalidInputError,
)
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.mt.decoder import DecoderConfig
from service.mt.rules import ALL_FEATURES
from service.mt.weights import WeightsVersion, check_version_name
from service.retrieval.base import document_methods
from service.retrieval.bowfd import IR_FEATURE, is_ir_term_feature
from service.retrieval.lex import is_lex_feature
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer

PROBE_WORDS = 3
PROBE_POP_LIMIT = 20


@dataclass(frozen=True)
class Activation:
    """The outcome of an activation: the version now active and the one it replaced."""

    record: WeightsVersion
    previous: str | None


def check_features(bundle: ModelBundle, record: WeightsVersion) -> None:
    """Refuse a version naming features the bundle does not have (InvalidInputError)."""
    known = set(ALL_FEATURES) | set(bundle.manifest.get("feature_names", ())) | {IR_FEATURE}
    unknown = sorted(
        n
        for n in record.weights
        if n not in known and not is_lex_feature(n) and not is_ir_term_feature(n)
    )
    if unknown:
        raise InvalidInputError(
            f"refused: {bundle.weights_store.path(record.version)} names features this model "
            f"does not have: {', '.join(unknown[:10])}; the active version keeps serving"
        )


def probe_text(bundle: ModelBundle, record: WeightsVersion) -> str:
    """A short source text for the probe: words whose LEX features the version weights, else
    the grammar's first alphabetic source words (an unknown word passes through)."""
    vocab = bundle.grammar.source_vocab
    known = set(vocab)
    lex_words = [
        n.split(":", 1)[1].split("_", 1)[0] for n in record.weights if n.startswith("lex:")
    ]
    words = [w for w in dict.fromkeys(lex_words) if w in known][:PROBE_WORDS]
    if not words:
        words = [w for w in vocab[:1000] if w.isalpha()][:PROBE_WORDS]
    return " ".join(words) or "probe"


def check_servable(
    bundle: ModelBundle,
    record: WeightsVersion,
    index: InvertedIndex,
    methods: Sequence[str] | None = None,
) -> None:
    """Decode a probe query with ``record``'s weights and rank it with every method in
    ``methods`` (default: :func:`~service.retrieval.base.document_methods`); refuse
    (ConflictError) if any of them cannot."""
    config = DecoderConfig(pop_limit=PROBE_POP_LIMIT)
    try:
        decoder = bundle.make_decoder(record.weights, config)
        text = probe_text(bundle, record)
        query = decode_query(decoder, text, bundle.src, weights_version=record.version)
    except ClirError as exc:
        raise ConflictError(
            f"refused: weights version {record.version!r} of {bundle.name} cannot decode: "
            f"{exc}; the active version keeps serving"
        ) from exc
    for method in document_methods() if methods is None else methods:
        try:
            make_scorer(method, index, bundle).rank(query, 1)
        except ClirError as exc:
            raise ConflictError(
                f"refused: the service cannot rank with weights version {record.version!r} of "
                f"{bundle.name} ({method}): {exc}; the active version keeps serving"
            ) from exc


def validate_version(
    bundle: ModelBundle, version: str, index: InvertedIndex | None = None
) -> WeightsVersion:
    """Read ``version`` back and check that the service can serve it (see the module text);
    without ``index`` only the file and its feature names are checked."""
    check_version_name(version)
    try:
        record = bundle.weights_store.load(version)
    except DataFormatError as exc:
        raise InvalidInputError(f"refused: {exc}; the active version keeps serving") from exc
    check_features(bundle, record)
    if index is not None:
        check_servable(bundle, record, index)
    return record


def active_version_or_none(bundle: ModelBundle) -> str | None:
    """The active version's name, or None if the pointer is missing or unreadable."""
    try:
        return bundle.weights_store.active_version()
    except ClirError:
        return None


class NotOfferedError(ConflictError):
    """A learned version its training did not offer for activation (the caller says how to
    force it: ``?force=true`` over REST, ``--force`` in the CLI)."""


def check_offered(record: WeightsVersion) -> None:
    """Refuse a version whose training did not offer it for activation."""
    m = record.metrics
    if m.get("activation_offered", 1.0) != 0.0:
        return
    if "heldout_map_gain" in m:
        why = (
            f"its MAP gain on {int(m.get('heldout_queries', 0))} held-out queries was "
            f"{m['heldout_map_gain']:+.4f} (p {m.get('heldout_p_map', float('nan')):.3f})"
        )
    else:
        why = "it did not gain MAP on dev"
    raise NotOfferedError(
        f"refused: weights version {record.version} was not offered for activation: {why}; "
        "the active version keeps serving"
    )


def activate_version(
    bundle: ModelBundle, version: str, index: InvertedIndex | None = None, *, force: bool = False
) -> Activation:
    """Validate ``version`` (:func:`validate_version`; unless ``force``, also that its training
    offered it, :func:`check_offered`) and make it the bundle's active one. The pointer is
    written to the bundle's weights state, never into the bundle."""
    record = validate_version(bundle, version, index)
    if not force:
        check_offered(record)
    previous = active_version_or_none(bundle)
    try:
        bundle.weights_store.activate(version)  # reads the file back once more
    except DataFormatError as exc:
        raise InvalidInputError(f"refused: {exc}; the active version keeps serving") from exc
    return Activation(record, previous)
