"""The ``clir`` command: one sub-command per verb (docs/cli.md).

This package only parses arguments and prints; the work is done by library modules, which
import without argparse. :mod:`service.cli.core` builds the parser and maps errors to exit
codes; each verb group is one module that declares its verbs' flags beside their handlers, and
a handler imports only what its verb needs:

- :mod:`~service.cli.models`: ``train-model``, ``build-demo``, ``tune``
- :mod:`~service.cli.index`: ``build-index``, ``docs``
- :mod:`~service.cli.search`: ``translate``, ``search``, ``eval``, ``eval-tr``, ``run``
- :mod:`~service.cli.weights`: ``weights``
- :mod:`~service.cli.runs`: ``eval-run``, ``compare-runs``
- :mod:`~service.cli.ltr`: ``train-ltr``
- :mod:`~service.cli.serving`: ``serve``, ``worker``
"""

from __future__ import annotations

from service.cli.core import EXIT_ERROR, build_parser, main

__all__ = ["EXIT_ERROR", "build_parser", "main"]
