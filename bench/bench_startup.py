"""Start-up time of the service: from `clir serve` to the first 200 of ``/readyz``.

The service compiles (or loads from numba's on-disk cache) every kernel a request can touch and
runs each request path once per language before it accepts requests (``CLIR_WARM_UP``), so
readiness means "fast", not only "loaded". Two cases per configuration:

* **cold**: as after a fresh install — an empty numba cache directory (``NUMBA_CACHE_DIR``)
  and the LM hash tables beside the ARPA files removed, so they are built and checked again;
* **cached**: the same command again, with what the cold start left behind.

Then the first search of each method after readiness is timed (it must not pay for any
compilation). Configurations: ``demo`` (the committed demo bundle and indexes) and ``full``
(models/de-en, models/zh-en, indexes/docs, indexes/pool, when present).

Writes ``bench/results/startup.json`` (``--out``). Run: ``.venv/bin/python -m bench startup``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import httpx2

from bench.common import RESULTS_DIR, ROOT, Help, write_result

OUT = RESULTS_DIR / "startup.json"
CONFIGS: dict[str, dict[str, list[str]]] = {
    "demo": {
        "bundles": ["models/demo-de-en"],
        "docs": ["indexes/demo"],
        "pool": ["indexes/demo-pool"],
    },
    "full": {
        "bundles": ["models/de-en", "models/zh-en"],
        "docs": ["indexes/docs"],
        "pool": ["indexes/pool"],
    },
}
QUERIES = {"de": "Wie drucke ich ein Dokument?", "zh": "如何打印文档？"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tables(bundles: list[str]) -> list[Path]:
    return [p for b in bundles for p in (ROOT / b).glob("*.table")]


def start(config: dict[str, list[str]], cache_dir: Path, timeout: float) -> dict[str, Any]:
    """Start the service, wait for readiness, time one request per method, stop it."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIR_")}
    env.update(
        NUMBA_CACHE_DIR=str(cache_dir),
        CLIR_MODEL_BUNDLES=json.dumps(config["bundles"]),
        CLIR_DOC_INDEXES=json.dumps(config["docs"]),
        CLIR_POOL_INDEXES=json.dumps(config["pool"]),
        CLIR_EMBEDDED_WORKER="false",
        CLIR_JOB_STORE=str(cache_dir / "jobs.sqlite3"),
    )
    cmd = [str(ROOT / ".venv/bin/clir"), "serve", "--host", "127.0.0.1", "--port", str(port)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {}
    try:
        with httpx2.Client(timeout=120.0) as client:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"the server exited with {proc.returncode}")
                if time.perf_counter() - t0 > timeout:
                    raise RuntimeError("the server was not ready in time")
                try:
                    if client.get(base + "/readyz").status_code == 200:
                        break
                except httpx2.TransportError:
                    pass
                time.sleep(0.2)
            out["ready_s"] = round(time.perf_counter() - t0, 2)
            langs = client.get(base + "/readyz").json()["models"]
            first: dict[str, float] = {}
            for lang in sorted(langs):
                for method in ("bowfd", "dt", "psq"):
                    t = time.perf_counter()
                    r = client.post(
                        base + "/v1/search",
                        json={"query": QUERIES[lang], "lang": lang, "method": method},
                    )
                    r.raise_for_status()
                    first[f"{lang}/search-{method}"] = round(1000 * (time.perf_counter() - t), 1)
                t = time.perf_counter()
                body = {"sentence": QUERIES[lang], "lang": lang}
                r = client.post(base + "/v1/suggest", json=body)
                r.raise_for_status()
                first[f"{lang}/suggest"] = round(1000 * (time.perf_counter() - t), 1)
            out["first_request_ms"] = first
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return out


@dataclass(frozen=True)
class Params:
    config: Annotated[
        tuple[Literal["demo", "full"], ...], Help("configurations (default: those present)")
    ] = ()
    timeout: Annotated[float, Help("seconds to wait for /readyz")] = 1800.0
    out: Annotated[Path, Help("JSON output")] = OUT


def run(args: Params) -> None:
    names: list[str] = list(args.config) or [
        n for n, c in CONFIGS.items() if all((ROOT / b).exists() for b in c["bundles"])
    ]
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "configs": {}}
    for name in names:
        config = CONFIGS[name]
        with tempfile.TemporaryDirectory(prefix="numba-") as tmp:
            for table in _tables(config["bundles"]):
                shutil.rmtree(table)
            cold = start(config, Path(tmp), args.timeout)
            print(name, "cold", json.dumps(cold), file=sys.stderr)
            cached = start(config, Path(tmp), args.timeout)
            print(name, "cached", json.dumps(cached), file=sys.stderr)
        results["configs"][name] = {"cold": cold, "cached": cached}
    signatures = {name: CONFIGS[name] for name in names}
    write_result(args.out, results, args, signatures=signatures)


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("startup")
