"""k-best derivations of a translation forest (Huang & Chiang 2005, Algorithm 3).

Plain k-best lists come from :class:`LazyKBest` (:func:`kbest`). Unique k-best — the best
derivation of each of the ``k`` best distinct target strings, as n-best lists for tuning, PSQ
and translation retrieval need (Hieber & Riezler 2015, §3) — has two engines, chosen by an
explicit argument of :func:`unique_kbest`: ``"compiled"`` (the default, several times faster,
so a time budget examines that many more derivations) and ``"reference"`` (Python over
:class:`LazyKBest`, the tested reference). With ``max_derivations`` the two return identical
lists (tests/forest/test_kbest_kernel.py).

The package, one concern per module, each importing only those above it:

* :mod:`.candidates`: what both engines prepare alike — the sorted initial candidates, canonical
  term ids, targets as patterns — and the time budget;
* :mod:`.lazy`: :class:`LazyKBest` and :func:`kbest`, in Python;
* :mod:`.reference`: :func:`~.reference.unique_kbest_reference` over :class:`LazyKBest`;
* :mod:`.kernel`: the compiled search (numba, imported with the module);
* :mod:`.compiled`: its arrays and calls, :func:`~.compiled.unique_kbest_compiled`.

The engines are imported when first used (:data:`UNIQUE_KBEST_ENGINES`), so importing this
package imports neither numba nor the reference, and the compiled path never loads the
reference.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any

from service.core.jit import Engine
from service.errors import ConfigurationError
from service.forest.hypergraph import Derivation, Hypergraph
from service.forest.inference import Weights
from service.forest.kbest.candidates import (
    CLOCK_EVERY,
    UNIQUE_KBEST_TIME_BUDGET_S,
    Entry,
    canonical_term_ids,
    initial_candidates,
    target_pattern,
)
from service.forest.kbest.lazy import LazyKBest, kbest

if TYPE_CHECKING:
    from service.forest.kbest.compiled import unique_kbest_compiled
    from service.forest.kbest.reference import unique_kbest_reference


# The unique k-best engines by name: (module of this package, function), imported on first use.
UNIQUE_KBEST_ENGINES: dict[str, tuple[str, str]] = {
    "compiled": ("compiled", "unique_kbest_compiled"),
    "reference": ("reference", "unique_kbest_reference"),
}

__all__ = [
    "CLOCK_EVERY",
    "UNIQUE_KBEST_ENGINES",
    "UNIQUE_KBEST_TIME_BUDGET_S",
    "Engine",
    "Entry",
    "LazyKBest",
    "canonical_term_ids",
    "initial_candidates",
    "kbest",
    "target_pattern",
    "unique_kbest",
    "unique_kbest_compiled",
    "unique_kbest_reference",
]


def _engine(name: str) -> Callable[..., list[Derivation]]:
    """The unique k-best function of engine ``name``, its module imported on first use."""
    try:
        module, function = UNIQUE_KBEST_ENGINES[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown k-best engine {name!r}; choose one of {sorted(UNIQUE_KBEST_ENGINES)}"
        ) from None
    found: Callable[..., list[Derivation]] = getattr(
        import_module(f"{__name__}.{module}"), function
    )
    return found


def unique_kbest(
    hg: Hypergraph,
    weights: Weights,
    k: int,
    max_derivations: int | None = None,
    time_budget: float | None = None,
    *,
    engine: Engine = "compiled",
) -> list[Derivation]:
    """The best derivation of each of the ``k`` best distinct target strings, in score order.

    Derivations are examined in score order and one whose string was already produced is
    skipped, until ``k`` strings are found or the goal has no more derivations, or:

    - ``max_derivations`` given: at most that many derivations are examined (and, if
      ``time_budget`` is also given, for at most that long);
    - otherwise for at most ``time_budget`` seconds (default
      :data:`UNIQUE_KBEST_TIME_BUDGET_S`; the service passes its setting
      ``kbest_time_budget_s``; ``math.inf`` for no bound), counted once the
      extractor is set up (the Viterbi pass, whose first call in a process loads the compiled
      kernel, and the sorting of the candidates come before).

    The clock is read every few hundred derivations or more (never before the first
    :data:`CLOCK_EVERY`), so the first of them are always examined and the list is never empty
    when the goal has a derivation. When the budget runs out the list holds the strings found
    so far: always a prefix of the unbounded list, but how long a prefix depends on the
    machine's speed, so pass ``max_derivations`` where results must be reproducible (tests,
    tuning comparisons).

    ``engine="compiled"`` (the default) runs the search in the compiled kernel
    (:mod:`service.forest.kbest.compiled`); ``"reference"`` in Python
    (:mod:`service.forest.kbest.reference`). With ``max_derivations`` both return identical
    lists; under a time budget the compiled one examines many more derivations.
    """
    return _engine(engine)(hg, weights, k, max_derivations, time_budget)


def __getattr__(name: str) -> Any:
    """Each engine's function by its name, imported on first use."""
    for module, function in UNIQUE_KBEST_ENGINES.values():
        if name == function:
            value = getattr(import_module(f"{__name__}.{module}"), function)
            globals()[name] = value
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {f for _, f in UNIQUE_KBEST_ENGINES.values()})
