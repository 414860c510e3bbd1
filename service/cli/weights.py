"""``clir weights``: list a model's weights versions, or activate one
(:mod:`service.retrieval.versions`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from service.cli.common import VerbAdder
from service.errors import ClirError


def register(verb: VerbAdder) -> None:
    """The weights verb."""
    _add_weights(verb)


def _add_weights(verb: VerbAdder) -> None:
    p = verb(
        "weights",
        "List a model's weights versions, or activate one (checked to serve first).",
        _cmd_weights,
    )
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--activate", metavar="VERSION", help="make this version the active one")
    p.add_argument(
        "--force",
        action="store_true",
        help="activate a learned version that did not gain on its held-out queries",
    )
    p.add_argument(
        "--index",
        type=Path,
        help="document index to probe the version with (default: the first configured one)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _cmd_weights(args: argparse.Namespace) -> int:
    from service.core.settings import get_settings
    from service.index.inverted import load_index
    from service.mt.bundle import load_bundle
    from service.retrieval.versions import NotOfferedError, activate_version

    settings = get_settings()
    bundle = load_bundle(args.model, state_root=settings.weights_state_dir)
    store = bundle.weights_store
    if args.activate is not None:
        index_path = args.index or settings.first_existing(settings.doc_indexes)
        if index_path is None:
            print("note: no document index: the version is not probed", file=sys.stderr)
        index = load_index(index_path) if index_path is not None else None
        try:
            done = activate_version(bundle, args.activate, index, force=args.force)
        except NotOfferedError as exc:
            raise NotOfferedError(f"{exc} (--force activates it anyway)") from exc
        payload: dict[str, Any] = {
            "model": str(args.model),
            "version": done.record.version,
            "previous": done.previous,
            "probed": index is not None,
            "state": str(store.writable),
        }
        print(json.dumps(payload, sort_keys=True))
        return 0
    active = store.active_version()
    rows = []
    for version in store.versions():
        row: dict[str, Any] = {
            "version": version,
            "origin": store.origin(version),
            "active": version == active,
        }
        try:
            record = store.load(version)
            row.update(source=record.source, created=record.created, metrics=record.metrics)
        except ClirError as exc:
            row["error"] = str(exc)
        rows.append(row)
    if args.json:
        print(json.dumps({"model": str(args.model), "active": active,
                          "state": str(store.writable), "versions": rows}))  # fmt: skip
        return 0
    print(f"# {args.model}: new versions and the active pointer in {store.writable}")
    for row in rows:
        mark = "*" if row["active"] else " "
        what = row.get("error") or row.get("source", "")
        print(f"{mark} {row['version']:<32} {row['origin']:<7} {what}")
    return 0
