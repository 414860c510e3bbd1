"""Imports of the packages that only the optional extras of ``pyproject.toml`` install.

``ray`` (extra ``ray``) runs the Ray training backend and ``eflomal`` (extra ``train``) aligns
words for ``clir train-model``; serving needs neither. A feature that needs one imports it
through :func:`import_extra`, so that a missing package is a :class:`MissingExtraError` naming
the extra that installs it, not a bare ``ImportError``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from service.errors import MissingExtraError


def import_extra(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` (from the optional ``extra``) for ``feature``, or raise.

    Only a missing ``module`` itself becomes :class:`MissingExtraError`; an installed package
    that fails to import (a broken build, a missing shared library) keeps its own error.
    """
    top = module.partition(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name not in (None, top, module):
            raise  # the package is there but something it imports is not: a broken install
        raise MissingExtraError(feature, top, extra) from exc
