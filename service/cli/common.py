"""What every verb module shares: the handler and verb-adder types, and registry names as
argparse ``choices`` that load only when argparse needs them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator

Handler = Callable[[argparse.Namespace], int]
"""A verb's handler: the parsed arguments in, the exit code out."""

VerbAdder = Callable[[str, str, Handler], argparse.ArgumentParser]
"""Adds a verb (name, help text, handler) and returns its parser, for its flags."""


class Registry:
    """The names of a registry as argparse ``choices``, looked up when argparse first needs
    them (to check a value or print help): importing a registry imports what it registers,
    which only the verbs that use it should pay for."""

    def __init__(self, names: Callable[[], Iterable[str]]) -> None:
        self._load = names
        self._names: tuple[str, ...] | None = None

    def _get(self) -> tuple[str, ...]:
        if self._names is None:
            self._names = tuple(self._load())
        return self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __contains__(self, name: object) -> bool:
        return name in self._get()

    def __len__(self) -> int:
        return len(self._get())
