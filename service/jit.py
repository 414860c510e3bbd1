"""Numba compilation on first use.

Importing numba costs about 0.4 s, so modules keep their kernels as plain Python functions
(the tested reference when run uncompiled) and call :func:`compiled` when they need the fast
version: the kernel is compiled once per process (``nogil`` so threads can run it in
parallel) and cached on disk by numba, which keeps the cost off import time and off start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])


@cache
def _compile(fn: Callable[..., Any]) -> Callable[..., Any]:
    import numba

    out: Callable[..., Any] = numba.njit(cache=True, nogil=True)(fn)
    return out


def compiled(fn: F) -> F:
    """``fn`` compiled by numba (``njit(cache=True, nogil=True)``), once per process."""
    return cast(F, _compile(fn))
