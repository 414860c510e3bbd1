"""Run every benchmark script ``bench/bench_*.py`` in turn (``make bench``).

Each script is a module with a ``main() -> None`` that writes ``bench/results/<name>.json``
and prints a summary; the table in ``bench/README.md`` is updated by hand from those files.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def main() -> int:
    scripts = sorted(Path(__file__).parent.glob("bench_*.py"))
    if not scripts:
        print("no benchmark scripts yet", file=sys.stderr)
        return 0
    for script in scripts:
        print(f"== {script.stem}", file=sys.stderr)
        importlib.import_module(f"bench.{script.stem}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
