"""Low-level file handling shared by every reader and writer.

* :func:`iter_lines` streams a (possibly gzip-compressed) text file line by line, decoding
  each line on its own so that one bad byte sequence is reported with its line number
  instead of aborting the whole file.
* :class:`MalformedLines` applies the caller's error policy: fail on the first malformed
  line, or skip and count, reporting the count (and the first few offenders) on stderr.
* :func:`atomic_write` writes to a temporary file beside the target and renames it into
  place, so a crash never leaves a half-written file under the final name.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import IO, TextIO

from service.errors import DataFormatError, MissingResourceError

GZIP_MAGIC = b"\x1f\x8b"


class ErrorPolicy(StrEnum):
    """What a reader does with a malformed line."""

    FAIL = "fail"
    SKIP = "skip"


def _open_binary(path: Path) -> IO[bytes]:
    if not path.exists():
        raise MissingResourceError(f"{path}: no such file")
    if path.is_dir():
        raise MissingResourceError(f"{path}: is a directory, expected a file")
    with path.open("rb") as probe:
        head = probe.read(2)
    if head == GZIP_MAGIC:
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


class MalformedLines:
    """Collects malformed lines of one file and enforces the error policy."""

    def __init__(self, path: Path, policy: ErrorPolicy, stream: TextIO | None = None) -> None:
        self.path = path
        self.policy = ErrorPolicy(policy)
        self.count = 0
        self.examples: list[str] = []
        self._stream = stream

    def add(self, line_no: int, reason: str) -> None:
        if self.policy is ErrorPolicy.FAIL:
            raise DataFormatError(self.path, line_no, reason)
        self.count += 1
        if len(self.examples) < 5:
            self.examples.append(f"line {line_no}: {reason}")

    def report(self) -> None:
        if self.count:
            stream = self._stream or sys.stderr
            shown = "; ".join(self.examples)
            print(
                f"{self.path}: skipped {self.count} malformed line(s) ({shown})",
                file=stream,
            )


def iter_lines(
    path: str | Path, malformed: MalformedLines | None = None
) -> Iterator[tuple[int, str]]:
    """Yield ``(line_no, text)`` for each line, without the line terminator.

    Lines that are not valid UTF-8 go to ``malformed`` (fail or skip); a truncated gzip
    stream is always an error, since the rest of the file is lost.
    """
    path = Path(path)
    policy = malformed or MalformedLines(path, ErrorPolicy.FAIL)
    line_no = 0
    with _open_binary(path) as fh:
        try:
            for raw in fh:
                line_no += 1
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    policy.add(line_no, f"not valid UTF-8 ({exc.reason} at byte {exc.start})")
                    continue
                yield line_no, text.rstrip("\r\n")
        except (EOFError, gzip.BadGzipFile, OSError) as exc:
            raise DataFormatError(path, line_no + 1, f"corrupt or truncated file: {exc}") from exc


@contextmanager
def open_output(path: str | Path) -> Iterator[TextIO]:
    """Open ``path`` for writing text atomically; ``.gz`` paths are gzip-compressed."""
    path = Path(path)
    with atomic_write(path) as tmp:
        if path.suffix == ".gz":
            with (
                open(tmp, "wb") as raw,
                gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz,
                io.TextIOWrapper(gz, encoding="utf-8", newline="\n") as text,
            ):
                yield text
        else:
            with open(tmp, "w", encoding="utf-8", newline="\n") as text:
                yield text


@contextmanager
def atomic_write(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it to ``path``.

    On any exception the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
