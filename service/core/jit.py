"""Numba compilation on first use, and the convention for numba kernels.

Importing numba costs about 0.4 s, so modules keep their kernels as plain Python functions
(the tested reference when run uncompiled) and call :func:`compiled` when they need the fast
version: the kernel is compiled once per process (``nogil`` so threads can run it in
parallel) and cached on disk by numba, which keeps the cost off import time and off start-up.

The convention, one rule for every kernel (all are ``cache=True, nogil=True``):

- A kernel that stands alone (calls no other kernel) is a plain function, called through
  ``compiled(kernel)(...)``. This is the rule for every module the serving path imports
  (the index, retrieval, inference, LTR): importing them must not import numba.
- Only kernels that other kernels call (numba must see a compiled callee when it compiles the
  caller; ``inline="always"`` helpers included) and the kernels calling them are decorated
  ``@numba.njit(cache=True, nogil=True)`` at import: the decoder's cube-pruning kernel, the LM
  table's lookups, the training-time rule extraction and feature estimation. Such a module
  imports numba when it is imported, so serving code imports it only where it needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, Literal, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

#: Every algorithm with a fast version runs it by default (``"compiled"``: numba kernels,
#: vectorised numpy) and keeps its slow, obviously correct version as ``"reference"``, chosen
#: by an explicit argument (tests/test_pairs.py lists the pairs).
Engine = Literal["compiled", "reference"]
ENGINES: tuple[Engine, ...] = ("compiled", "reference")


@cache
def _compile(fn: Callable[..., Any]) -> Callable[..., Any]:
    import numba

    out: Callable[..., Any] = numba.njit(cache=True, nogil=True)(fn)
    return out


def compiled(fn: F) -> F:
    """``fn`` compiled by numba (``njit(cache=True, nogil=True)``), once per process."""
    return cast(F, _compile(fn))
