"""Files on disk: SHA-256 checksums and directories of ``.npy`` arrays written atomically.

Three artifacts are such directories: the inverted index (:mod:`service.index.storage`), the
binary grammar (:mod:`service.mt.grammar`) and the LM table cache (:mod:`service.mt.lm.cache`).
They share this module's writer and reader; each keeps its own manifest (format name, version
key, JSON layout), so the bytes on disk are what they were before the three shared code.

- :func:`sha256_file` is the one checksum of a file's bytes (array files, source corpora).
- :func:`atomic_directory` yields a temporary directory beside the target; when the block
  ends without an exception its files are fsynced and the directory is renamed into place
  (an existing target is moved aside first, put back if the rename fails, and removed after).
  A crash never leaves a half-written directory under the final name. The temporary
  directory is made with the umask's permissions (not ``tempfile.mkdtemp``'s 0700), since
  the artifacts are read by other users (a server, a container).
- :func:`write_array_dir` writes arrays plus a ``manifest.json`` whose ``arrays`` table holds,
  per array, its file name, dtype, shape, byte size and SHA-256.
- :func:`read_manifest` and :func:`load_array` read such a directory back: the manifest is
  checked for its format and version, each array is memory-mapped and checked against its
  table entry (size, dtype, shape; the SHA-256 when ``verify``). Every problem is a
  :class:`~service.errors.DataFormatError` (or :class:`~service.errors.MissingResourceError`
  for an absent directory or manifest) naming the file, followed by ``hint`` (what to do).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import resource
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from service.errors import DataFormatError, MissingResourceError, OutOfFilesError

MANIFEST = "manifest.json"

_CHUNK = 1 << 22  # bytes read at a time when hashing a file
# numpy parses a .npy header with ast.literal_eval, and CPython 3.11's AST constructor keeps
# its recursion depth per interpreter, not per thread: two threads parsing at once can fail
# with "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905). Search
# threads open segments while a commit is read beside them, so headers are read one at a time.
_NPY_LOCK = threading.Lock()


def out_of_files(file: str | Path) -> OutOfFilesError:
    """The error of a file that could not be opened or mapped because the process has as
    many files open as its limit allows (the file itself is fine)."""
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return OutOfFilesError(
        f"{file}: this process may open no more files (limit {limit}); every "
        "memory-mapped array holds one: raise the limit (ulimit -n, systemd LimitNOFILE=, "
        "docker run --ulimit nofile=)"
    )


def load_npy(file: str | Path, mmap_mode: Any = None) -> npt.NDArray[Any]:
    """``np.load`` of one ``.npy`` file (no pickles), safe from any thread."""
    with _NPY_LOCK:
        arr: npt.NDArray[Any] = np.load(file, mmap_mode=mmap_mode, allow_pickle=False)
    return arr


def sha256_file(path: str | Path) -> str:
    """The SHA-256 (hex) of the bytes of the file at ``path``."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


# --- writing ------------------------------------------------------------------------------


def fsync_dir(path: Path) -> None:
    """Flush the directory entry of ``path`` (after files were created or renamed in it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes | Callable[[BinaryIO], object]) -> int:
    """Write ``data`` (bytes, or a function writing to the open file) to ``path`` and fsync
    it; the file's size."""
    with open(path, "wb") as fh:
        if isinstance(data, bytes):
            fh.write(data)
        else:
            data(fh)
        fh.flush()
        os.fsync(fh.fileno())
    return path.stat().st_size


def save_array(path: Path, array: npt.NDArray[Any]) -> int:
    """Save ``array`` as a ``.npy`` file (no pickles), fsynced; the file's size."""
    return write_file(path, lambda fh: np.save(fh, array, allow_pickle=False))


def _sibling(target: Path, kind: str) -> Path:
    """A fresh name beside ``target`` for a temporary (``tmp``) or replaced (``old``)
    directory: ``.<name>.<kind>-<pid>-<random>`` (see :func:`remove_leftovers`)."""
    return target.parent / f".{target.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}"


@contextmanager
def atomic_directory(target: str | Path) -> Iterator[Path]:
    """A temporary directory to fill; renamed to ``target`` when the block succeeds, removed
    when it raises (``target`` is then untouched)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(target, "tmp")
    os.mkdir(tmp)
    try:
        yield tmp
        fsync_dir(tmp)
        _replace_dir(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _replace_dir(new: Path, target: Path) -> None:
    """Rename ``new`` to ``target``; an existing ``target`` is moved aside, then removed."""
    old: Path | None = None
    if target.exists() or target.is_symlink():
        old = _sibling(target, "old")
        os.rename(target, old)
    try:
        os.rename(new, target)
    except BaseException:
        if old is not None:
            os.rename(old, target)
        raise
    fsync_dir(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _writer_gone(name: str) -> bool:
    """Whether the process that made the temporary directory ``name`` (its pid is in the
    name, :func:`_sibling`) is no longer running on this machine."""
    try:
        pid = int(name.rsplit("-", 2)[-2])
    except (IndexError, ValueError):
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def remove_leftovers(target: Path, stale_seconds: float) -> None:
    """Remove what interrupted writers left beside ``target``: replaced directories, and
    temporary ones older than ``stale_seconds`` (a younger one may be a writer at work)."""
    now = time.time()
    for path in target.parent.glob(f".{target.name}.*"):
        try:
            stale = (
                ".old-" in path.name
                or _writer_gone(path.name)
                or now - path.stat().st_mtime > stale_seconds
            )
        except OSError:
            continue
        if stale and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)


def write_array_dir(
    target: str | Path,
    arrays: Mapping[str, npt.NDArray[Any]],
    manifest: Mapping[str, Any],
    *,
    indent: int,
    sort_keys: bool = False,
    ensure_ascii: bool = True,
) -> dict[str, Any]:
    """Write ``arrays`` (``<name>.npy`` each, C order) and ``manifest.json`` to ``target``
    atomically; the manifest written: ``manifest`` with its ``arrays`` key set to the table
    of the arrays (in the position of an ``arrays`` key already in ``manifest``, else last).
    ``indent``, ``sort_keys`` and ``ensure_ascii`` are the JSON layout of the caller's format.
    """
    with atomic_directory(target) as tmp:
        table: dict[str, dict[str, Any]] = {}
        for name, array in arrays.items():
            file = tmp / f"{name}.npy"
            arr = np.ascontiguousarray(array)
            size = save_array(file, arr)
            table[name] = {
                "file": file.name,
                "dtype": arr.dtype.str,
                "shape": list(arr.shape),
                "bytes": size,
                "sha256": sha256_file(file),
            }
        full = {**manifest, "arrays": table}
        body = json.dumps(full, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii)
        write_file(tmp / MANIFEST, (body + "\n").encode("utf-8"))  # last: marks it complete
    return full


# --- reading ------------------------------------------------------------------------------


def read_json_manifest(
    file: Path, *, what: str, format_name: str, version_key: str, version: int, hint: str
) -> dict[str, Any]:
    """The JSON manifest ``file`` of a ``what``, checked to be a ``format_name`` manifest of
    ``version`` (under ``version_key``)."""
    if not file.is_file():
        raise MissingResourceError(
            f"{file}: missing; {file.parent} is not a complete {what}; {hint}"
        )
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFormatError(file, None, f"not valid JSON ({exc}); {hint}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != format_name:
        raise DataFormatError(file, None, f"not a {format_name} manifest; {hint}")
    found = manifest.get(version_key)
    if found != version:
        raise DataFormatError(
            file, None, f"{what} format version {found!r}, this code reads {version}; {hint}"
        )
    return manifest


def read_manifest(
    path: str | Path,
    *,
    what: str,
    format_name: str,
    version_key: str,
    version: int,
    hint: str,
    required: Iterable[str] = (),
) -> dict[str, Any]:
    """The manifest of the array directory ``path`` (a ``what``, e.g. "index"), checked to be
    a ``format_name`` manifest of ``version`` (under ``version_key``) with an ``arrays`` table
    and the ``required`` keys."""
    path = Path(path)
    file = path / MANIFEST
    if not path.is_dir():
        raise MissingResourceError(f"{path}: no {what} directory here; {hint}")
    manifest = read_json_manifest(
        file, what=what, format_name=format_name, version_key=version_key, version=version,
        hint=hint,
    )  # fmt: skip
    if not isinstance(manifest.get("arrays"), dict):
        raise DataFormatError(file, None, f"manifest has no array table; {hint}")
    for key in required:
        if key not in manifest:
            raise DataFormatError(file, None, f"manifest lacks {key!r}; {hint}")
    return manifest


def load_array(
    path: str | Path, name: str, manifest: Mapping[str, Any], *, verify: bool, hint: str
) -> npt.NDArray[Any]:
    """Memory-map the array ``name`` of the directory ``path``, checked against its entry in
    the ``manifest``'s array table (and its SHA-256 when ``verify``)."""
    path = Path(path)
    file = path / f"{name}.npy"
    spec = manifest["arrays"].get(name)
    if not isinstance(spec, dict) or spec.get("file") != file.name:
        raise DataFormatError(path / MANIFEST, None, f"no valid entry for array {name!r}; {hint}")
    if not file.is_file():
        raise DataFormatError(file, None, f"array file missing; {hint}")
    size = file.stat().st_size
    if size != spec.get("bytes"):
        raise DataFormatError(
            file,
            None,
            f"{size} bytes, the manifest says {spec.get('bytes')} (truncated or replaced); {hint}",
        )
    if verify and sha256_file(file) != spec.get("sha256"):
        raise DataFormatError(file, None, f"checksum mismatch: the file is corrupted; {hint}")
    try:
        arr = load_npy(file, mmap_mode="r")
    except OSError as exc:
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            raise out_of_files(file) from exc
        raise DataFormatError(file, None, f"unreadable .npy array ({exc}); {hint}") from exc
    except (ValueError, EOFError) as exc:
        raise DataFormatError(file, None, f"unreadable .npy array ({exc}); {hint}") from exc
    if arr.dtype.str != spec.get("dtype") or list(arr.shape) != spec.get("shape"):
        raise DataFormatError(
            file,
            None,
            f"array is {arr.dtype.str}{list(arr.shape)}, the manifest says "
            f"{spec.get('dtype')}{spec.get('shape')}; {hint}",
        )
    return arr


def load_arrays(
    path: str | Path,
    manifest: Mapping[str, Any],
    *,
    verify: bool,
    hint: str,
    names: Iterable[str] | None = None,
) -> dict[str, npt.NDArray[Any]]:
    """:func:`load_array` for each of ``names`` (default: every array of the manifest)."""
    wanted = manifest["arrays"] if names is None else names
    return {name: load_array(path, name, manifest, verify=verify, hint=hint) for name in wanted}
