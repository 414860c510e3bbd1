"""The benchmarks' one contract (bench/registry.py, bench/cli.py): every benchmark resolves to a
function of one frozen dataclass whose defaults bind and whose fields have flags, every
bench_*.py module is registered, cheap ones keep to the demo bundle and bench/results/quick/,
and every result is written with its stamp. Nothing here runs a benchmark."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any, Literal

import pytest

from bench.cli import defaults, flag_type, params_type, parse, parser_for
from bench.common import QUICK_DIR, ROOT, Help
from bench.registry import BENCHMARKS, get, resolve

NAMES = sorted(BENCHMARKS)
FULL = ("models/de-en", "models/zh-en", "indexes/docs", "indexes/pool")


@pytest.mark.parametrize("name", NAMES)
def test_every_benchmark_resolves_and_its_defaults_bind(name: str) -> None:
    benchmark = get(name)
    cls = params_type(resolve(benchmark))
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert set(benchmark.preset) <= {f.name for f in dataclasses.fields(cls)}
    params = defaults(benchmark)  # every field has a default; the preset's values fit
    assert parse(benchmark, []) == params  # no flags: the defaults
    assert benchmark.summary and "\n" not in benchmark.summary


def _committed_bench_modules() -> set[str]:
    """The bench_*.py modules of the repository (git's list: a script being written and not
    yet committed is not checked; the files themselves outside a git checkout)."""
    listed = subprocess.run(["git", "ls-files", "bench/bench_*.py"], cwd=ROOT,
                            capture_output=True, text=True)  # fmt: skip
    paths = listed.stdout.split() if listed.returncode == 0 else []
    return {Path(p).stem for p in paths} or {p.stem for p in (ROOT / "bench").glob("bench_*.py")}


@pytest.mark.parametrize("name", [n for n in NAMES if BENCHMARKS[n].cheap])
def test_a_cheap_benchmark_needs_no_full_model_and_writes_under_quick(name: str) -> None:
    benchmark = get(name)
    assert not any(need.startswith(FULL) for need in benchmark.needs)
    out = getattr(defaults(benchmark), "out", None)
    assert isinstance(out, Path) and out.parent == QUICK_DIR


def test_flags_come_from_the_field_types() -> None:
    decoder = parse(get("decoder"), ["--pops", "50,200", "1000", "--model", "demo-de-en"])
    assert decoder.pops == (50, 200, 1000) and decoder.model == ("demo-de-en",)
    assert parse(get("decoder"), ["--pops", "50", "--pops", "200"]).pops == (50, 200)
    tr = parse(get("tr"), ["zh", "--queries", "5", "--model", "/tmp/m"])
    assert (tr.src, tr.queries, tr.model) == ("zh", 5, Path("/tmp/m"))
    assert parse(get("tr-demo"), []).queries == 12  # the preset
    retrieval = parse(get("retrieval"), ["--no-ablation", "--rsj-index", "keep=/a,b", "x=/y"])
    assert retrieval.ablation is False and retrieval.rsj_index == ("keep=/a,b", "x=/y")
    assert parse(get("retrieval"), ["--max-queries", "3"]).max_queries == 3


@pytest.mark.parametrize(
    "argv", [["xx"], ["--queries", "many"], ["--nope", "1"], ["de", "zh"]], ids=str
)
def test_bad_flags_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(get("tr"), argv)
    assert "python -m bench tr" in capsys.readouterr().err


def test_an_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(KeyError, match=r"valid: .*tr-demo"):
        get("tr-dem")


@pytest.mark.parametrize("tp", [dict[str, int], int | str, tuple[int, str], list[int], Any])
def test_a_type_without_a_command_line_form_is_refused(tp: Any) -> None:
    with pytest.raises(TypeError):
        flag_type(tp)


def test_literal_fields_list_their_choices() -> None:
    assert flag_type(Literal["de", "zh"]).choices == ("de", "zh")
    assert "{de,zh}" in parser_for(get("tr")).format_help()


@dataclasses.dataclass(frozen=True)
class _Params:
    queries: int = 3
    model: Path = ROOT / "models" / "demo-de-en"


def test_help_metadata_reaches_the_flags() -> None:
    assert Help("x").positional is False
    text = parser_for(get("tr")).format_help()
    assert "dev sentences (the first N) (default: 400)" in " ".join(text.split())
