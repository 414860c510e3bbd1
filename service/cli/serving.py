"""``clir serve`` and ``clir worker``: the web service's processes and the background job worker
(:mod:`service.api.workers`, :mod:`service.jobs.worker`).
"""

from __future__ import annotations

import argparse

from service.cli.common import VerbAdder
from service.errors import ConfigurationError


def register(verb: VerbAdder) -> None:
    """The service verbs, in the order ``clir --help`` lists them."""
    _add_serve(verb)
    _add_worker(verb)


def _add_serve(verb: VerbAdder) -> None:
    p = verb("serve", "Run the web service.", _cmd_serve)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--log-level", default="info")
    p.add_argument(
        "--workers", type=int, help="API processes, one per core (default: CLIR_WORKERS, 1)"
    )


def _cmd_serve(args: argparse.Namespace) -> int:
    from service.api.workers import serve
    from service.core.settings import get_settings

    settings = get_settings()
    workers = args.workers if args.workers is not None else settings.workers
    if workers < 1:
        raise ConfigurationError(f"--workers must be at least 1, got {workers}")
    serve(settings, host=args.host, port=args.port, log_level=args.log_level, workers=workers)
    return 0


def _add_worker(verb: VerbAdder) -> None:
    p = verb("worker", "Run the background job worker (training jobs).", _cmd_worker)
    p.add_argument("--once", action="store_true", help="Run at most one queued job, then exit.")
    p.add_argument("--poll-s", type=float, default=None, help="Seconds between queue polls.")


def _cmd_worker(args: argparse.Namespace) -> int:
    import logging

    from service.core.settings import get_settings
    from service.jobs.worker import run_worker

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s worker %(process)d %(levelname)s %(message)s"
    )
    run_worker(get_settings(), once=args.once, poll_s=args.poll_s)
    return 0
