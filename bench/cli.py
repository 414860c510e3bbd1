"""``python -m bench``: run a benchmark of :data:`bench.registry.BENCHMARKS` by name.

Every benchmark is a function of one argument, a frozen dataclass of parameters whose fields
all have defaults; this module makes a command-line flag of each field from its type::

    python -m bench --list                  # name, cheap or full, what it measures
    python -m bench tr-demo                 # the defaults (and the registry's preset)
    python -m bench tr de --queries 100     # a positional field, then --name value
    python -m bench decoder --pops 50,200   # a tuple field: comma- or space-separated
    python -m bench --cheap                 # every cheap benchmark in turn (`make bench`)

Types understood: ``bool`` (``--x`` / ``--no-x``), ``int``, ``float``, ``str``, ``Path``,
``Literal[...]`` (the choices), ``X | None`` and ``tuple[X, ...]`` (values after the flag,
or the flag repeated; numbers may also be comma-separated). A field's help text is
its ``Annotated[T, Help("...")]`` metadata; ``Help("...", positional=True)`` makes it an
optional positional argument.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import sys
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from bench.common import Help, jsonable
from bench.registry import BENCHMARKS, Benchmark, get, resolve


@dataclasses.dataclass(frozen=True)
class FlagType:
    """How the command line spells a field's type."""

    convert: Callable[[str], Any]
    choices: tuple[Any, ...] | None = None
    many: bool = False  # tuple[X, ...]: one or more values
    boolean: bool = False


def _scalar(tp: Any) -> FlagType:
    if get_origin(tp) is Literal:
        choices = get_args(tp)
        kind = type(choices[0])
        if not all(type(c) is kind for c in choices):
            raise TypeError(f"mixed Literal choices {choices}")
        return FlagType(kind, choices)
    if tp in (int, float, str, Path):
        return FlagType(tp)
    raise TypeError(f"no command-line form for the type {tp!r}")


def flag_type(tp: Any) -> FlagType:
    """The command-line form of a field's type (``TypeError`` when there is none)."""
    if get_origin(tp) in (Union, types.UnionType):
        rest = [a for a in get_args(tp) if a is not type(None)]
        if len(rest) != 1:
            raise TypeError(f"only X | None unions have a command-line form, not {tp!r}")
        tp = rest[0]
    if tp is bool:
        return FlagType(bool, boolean=True)
    if get_origin(tp) is tuple:
        args = get_args(tp)
        if len(args) != 2 or args[1] is not Ellipsis:
            raise TypeError(f"only tuple[X, ...] has a command-line form, not {tp!r}")
        return dataclasses.replace(_scalar(args[0]), many=True)
    return _scalar(tp)


class _Values(argparse.Action):
    """Converts (and for a tuple field, accumulates) values: ``--pops 50,200 1000`` and
    ``--pops 50 --pops 200`` both give ``(50, 200, ...)``; commas split numbers only (a
    string may hold one, e.g. ``--env 'CLIR_DOC_INDEXES=["a","b"]'``)."""

    def __init__(self, option_strings: list[str], dest: str, kind: FlagType, **kw: Any) -> None:
        self.kind = kind
        super().__init__(option_strings, dest, **kw)

    def _one(self, parser: argparse.ArgumentParser, text: str) -> Any:
        try:
            value = self.kind.convert(text)
        except ValueError:
            parser.error(f"{self.metavar or self.dest}: invalid value {text!r}")
        if self.kind.choices is not None and value not in self.kind.choices:
            valid = ", ".join(map(str, self.kind.choices))
            parser.error(f"{self.metavar or self.dest}: {text!r} is not one of {valid}")
        return value

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if values is None:  # an omitted positional: keep the field's default
            return
        if not self.kind.many:
            setattr(namespace, self.dest, self._one(parser, str(values)))
            return
        items = list(getattr(namespace, self.dest, None) or [])
        texts = [values] if isinstance(values, str) else list(values)
        for text in texts:
            parts = text.split(",") if self.kind.convert in (int, float) else [text]
            items += [self._one(parser, p) for p in parts if p]
        setattr(namespace, self.dest, tuple(items))


def params_type(fn: Callable[..., Any]) -> type[Any]:
    """The dataclass of parameters a benchmark function takes (its one argument)."""
    hints = get_type_hints(fn)
    names = list(inspect.signature(fn).parameters)
    if len(names) != 1:
        raise TypeError(f"{fn.__qualname__} must take one argument, its parameters")
    cls = hints.get(names[0])
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{fn.__qualname__}'s argument must be annotated with a dataclass")
    return cls


def defaults(benchmark: Benchmark) -> Any:
    """The parameters ``python -m bench NAME`` runs with: the dataclass's defaults with the
    registry's preset applied."""
    fn = resolve(benchmark)
    return dataclasses.replace(params_type(fn)(), **benchmark.preset)


def _field_help(tp: Any) -> tuple[Any, Help]:
    """A field's type without ``Annotated``, and its :class:`Help` (empty when it has none)."""
    if get_origin(tp) is Annotated:
        base, *extras = get_args(tp)
        return base, next((e for e in extras if isinstance(e, Help)), Help(""))
    return tp, Help("")


def parser_for(benchmark: Benchmark) -> argparse.ArgumentParser:
    """The command line of one benchmark: a flag per field, its default in the help."""
    fn = resolve(benchmark)
    cls = params_type(fn)
    base = defaults(benchmark)
    hints = get_type_hints(cls, include_extras=True)
    p = argparse.ArgumentParser(
        prog=f"python -m bench {benchmark.name}",
        description=f"{benchmark.summary} ({'cheap' if benchmark.cheap else 'full'})",
    )
    for f in dataclasses.fields(cls):
        tp, info = _field_help(hints[f.name])
        kind = flag_type(tp)
        text = info.text
        if "default" not in text:
            text = f"{text} (default: {jsonable(getattr(base, f.name))})".strip()
        flag = "--" + f.name.replace("_", "-")
        metavar = "{" + ",".join(map(str, kind.choices)) + "}" if kind.choices else f.name.upper()
        if kind.boolean:
            p.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction,
                           default=argparse.SUPPRESS, help=text)  # fmt: skip
        elif info.positional:
            nargs = "*" if kind.many else "?"
            p.add_argument(f.name, action=_Values, kind=kind, nargs=nargs, default=None,
                           metavar=metavar, help=text)  # fmt: skip
        else:
            p.add_argument(flag, dest=f.name, action=_Values, kind=kind,
                           nargs="+" if kind.many else None, default=argparse.SUPPRESS,
                           metavar=metavar, help=text)  # fmt: skip
    return p


def parse(benchmark: Benchmark, argv: Sequence[str]) -> Any:
    """``argv`` (the flags after the name) as the benchmark's parameters."""
    given = {k: v for k, v in vars(parser_for(benchmark).parse_args(list(argv))).items()
             if v is not None}  # fmt: skip
    return dataclasses.replace(defaults(benchmark), **given)


def run(benchmark: Benchmark, argv: Sequence[str] = ()) -> None:
    params = parse(benchmark, argv)
    resolve(benchmark)(params)


def listing() -> str:
    """One line per benchmark: name, cheap or full, what it measures and what it needs."""
    width = max(len(n) for n in BENCHMARKS)
    lines = []
    for b in BENCHMARKS.values():
        needs = f"  [needs {', '.join(b.needs)}]" if b.needs else ""
        lines.append(f"{b.name:<{width}}  {'cheap' if b.cheap else 'full ':5}  {b.summary}{needs}")
    return "\n".join(lines)


def run_cheap() -> int:
    """Every cheap benchmark with its defaults, in turn; the names of those that failed."""
    failed = []
    for b in BENCHMARKS.values():
        if not b.cheap:
            continue
        print(f"== {b.name}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            run(b)
        except Exception as exc:  # report, then go on with the next benchmark
            print(f"== {b.name} FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
            failed.append(b.name)
            continue
        print(f"== {b.name} done in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


USAGE = """usage: python -m bench NAME [--param value ...] | --list | --cheap | NAME --help

Run one benchmark by name (`--list` shows them), or every cheap one (`--cheap`, what
`make bench` runs). Results go to bench/results/, each stamped with the git revision, the
machine, the time, the parameters and the signatures of what was measured."""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] == "--list":
        print(listing())
        return 0
    if args[0] == "--cheap":
        return run_cheap()
    try:
        benchmark = get(args[0])
    except KeyError as exc:
        print(exc.args[0], file=sys.stderr)
        return 2
    run(benchmark, args[1:])
    return 0


def main_for(name: str) -> None:
    """What ``python -m bench.bench_<x> ...`` does: ``python -m bench <name> ...``."""
    run(get(name), sys.argv[1:])
