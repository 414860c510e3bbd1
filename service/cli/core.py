"""The ``clir`` parser and entry point: one sub-command per verb, each verb group's module adding
its verbs (with their flags beside their handlers); domain errors mapped to exit codes.

Progress goes to stderr, results to stdout. A domain error (:class:`service.errors.ClirError`)
prints one line (``clir: error: ...``) and exits 1; an interrupt exits 130.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from service.cli.common import Handler, VerbAdder
from service.cli.index import register as register_index
from service.cli.ltr import register as register_ltr
from service.cli.models import register as register_models
from service.cli.runs import register as register_runs
from service.cli.search import register as register_search
from service.cli.serving import register as register_serving
from service.cli.weights import register as register_weights
from service.core.processes import raise_open_files_limit
from service.errors import ClirError

# One BLAS thread per process: the heavy work is many small products, which multithreaded
# OpenBLAS slows down several times on this 2-core machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130

VERB_GROUPS: tuple[Callable[[VerbAdder], None], ...] = (
    register_models,
    register_index,
    register_search,
    register_weights,
    register_runs,
    register_ltr,
    register_serving,
)
"""Each verb module's ``register``, in the order ``clir --help`` lists their verbs."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clir", description="Cross-lingual retrieval with bag-of-words forced decoding."
    )
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, help_text: str, handler: Handler) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(handler=handler)
        return p

    for register in VERB_GROUPS:
        register(verb)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    raise_open_files_limit()  # indexes and models are memory-mapped, a descriptor per array
    try:
        return handler(args)
    except ClirError as exc:
        print(f"clir: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("clir: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
