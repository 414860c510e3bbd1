"""The benchmarks' one contract (bench/registry.py, bench/cli.py): every benchmark resolves to a
function of one frozen dataclass whose defaults bind and whose fields have flags, every
bench_*.py module is registered, cheap ones keep to the demo bundle and bench/results/quick/,
and every result is written with its stamp. Nothing here runs a benchmark."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest

from bench.cli import defaults, flag_type, params_type, parse, parser_for
from bench.common import QUICK_DIR, ROOT, Help, write_result
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


def test_every_bench_module_is_registered() -> None:
    registered = {b.target.split(":")[0].removeprefix("bench.") for b in BENCHMARKS.values()}
    missing = sorted(_committed_bench_modules() - registered)
    assert not missing, (
        f"register {missing} in bench/registry.py: a function run(params: Params) of one frozen "
        "dataclass with typed defaults, written with bench.common.write_result"
    )


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


def test_python_m_bench_list_names_every_benchmark() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--list"], cwd=ROOT, capture_output=True, text=True,
        check=True, timeout=60,
    ).stdout  # fmt: skip
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()}
    assert rows == {n: "cheap" if b.cheap else "full" for n, b in BENCHMARKS.items()}


@dataclasses.dataclass(frozen=True)
class _Params:
    queries: int = 3
    model: Path = ROOT / "models" / "demo-de-en"


def test_a_result_is_written_with_its_stamp(tmp_path: Path) -> None:
    path = write_result(tmp_path / "r.json", {"map": 0.5, "stamp": "old"}, _Params(),
                        signatures={"bundle": {"model": "demo-de-en"}})  # fmt: skip
    data = json.loads(path.read_text())
    assert data["map"] == 0.5
    stamp = data["stamp"]
    assert len(stamp["revision"]) == 40 and isinstance(stamp["dirty"], bool)
    assert {"cpus", "platform", "python"} <= set(stamp["machine"])
    assert stamp["time"].endswith("+00:00")
    assert stamp["params"] == {"queries": 3, "model": "models/demo-de-en"}
    assert stamp["signatures"] == {"bundle": {"model": "demo-de-en"}}


def test_a_keyed_result_keeps_the_other_records(tmp_path: Path) -> None:
    path = tmp_path / "collection.json"
    path.write_text(json.dumps({"build/x1": {"seconds": 1.0}}))
    write_result(path, {"seconds": 2.0}, _Params(), key="build/x2", sort_keys=True)
    data = json.loads(path.read_text())
    assert data["build/x1"] == {"seconds": 1.0}
    assert data["build/x2"]["seconds"] == 2.0 and "revision" in data["build/x2"]["stamp"]
    assert list(data) == sorted(data)


def test_help_metadata_reaches_the_flags() -> None:
    assert Help("x").positional is False
    text = parser_for(get("tr")).format_help()
    assert "dev sentences (the first N) (default: 400)" in " ".join(text.split())
