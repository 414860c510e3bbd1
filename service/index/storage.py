"""On-disk format of an index: a directory of ``.npy`` arrays plus ``manifest.json``.

The manifest holds the format version, the build parameters and, for every array, its file
name, dtype, shape, byte size and SHA-256. Writing is atomic: everything goes into a
temporary directory beside the target, is fsynced, and only then renamed into place, so a
crash never leaves a half-written index under the final name (an existing index being
replaced is moved aside first and removed after the rename). Loading memory-maps the arrays
and checks each file against the manifest; a missing, truncated or corrupted file is a
:class:`~service.errors.DataFormatError` naming that file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from service.errors import DataFormatError, MissingResourceError

FORMAT_NAME = "clir-inverted-index"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"

Manifest = dict[str, Any]
_REBUILD = "rebuild the index (clir build-index ... --force)"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes (the source checksum recorded in the manifest)."""
    return _sha256(Path(path))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_index_dir(out: str | Path, arrays: Mapping[str, np.ndarray], manifest: Manifest) -> None:
    """Write ``arrays`` and ``manifest`` (plus the array table) to ``out`` atomically."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        table: dict[str, dict[str, Any]] = {}
        for name, array in arrays.items():
            file = tmp / f"{name}.npy"
            arr = np.ascontiguousarray(array)
            with file.open("wb") as fh:
                np.save(fh, arr, allow_pickle=False)
                fh.flush()
                os.fsync(fh.fileno())
            table[name] = {
                "file": file.name,
                "dtype": arr.dtype.str,
                "shape": list(arr.shape),
                "bytes": file.stat().st_size,
                "sha256": _sha256(file),
            }
        full = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, **manifest}
        full["arrays"] = table
        with (tmp / MANIFEST).open("w", encoding="utf-8") as fh:
            json.dump(full, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_dir(tmp)
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _replace_dir(new: Path, target: Path) -> None:
    """Rename ``new`` to ``target``; an existing ``target`` is moved aside, then removed."""
    old: Path | None = None
    if target.exists() or target.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
        os.rmdir(old)
        os.rename(target, old)
    try:
        os.rename(new, target)
    except BaseException:
        if old is not None:
            os.rename(old, target)
        raise
    _fsync_dir(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def read_manifest(path: str | Path) -> Manifest:
    """The manifest of the index directory ``path``, checked for format and version."""
    path = Path(path)
    file = path / MANIFEST
    if not path.is_dir():
        raise MissingResourceError(
            f"{path}: no index directory here; build it with clir build-index"
        )
    if not file.is_file():
        raise DataFormatError(file, None, f"missing index manifest; {_REBUILD}")
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFormatError(file, None, f"unreadable manifest ({exc}); {_REBUILD}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise DataFormatError(file, None, f"not a {FORMAT_NAME} manifest; {_REBUILD}")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise DataFormatError(
            file,
            None,
            f"index format version {version}, this code reads {FORMAT_VERSION}; {_REBUILD}",
        )
    if not isinstance(manifest.get("arrays"), dict):
        raise DataFormatError(file, None, f"manifest has no array table; {_REBUILD}")
    return manifest


def load_arrays(
    path: str | Path, manifest: Manifest, verify: bool = False
) -> dict[str, np.ndarray]:
    """Memory-map every array of the manifest, checking size, dtype and shape (and the
    SHA-256 when ``verify``); any mismatch is a DataFormatError naming the file."""
    path = Path(path)
    out: dict[str, np.ndarray] = {}
    for name, meta in manifest["arrays"].items():
        file = path / str(meta.get("file", f"{name}.npy"))
        if not file.is_file():
            raise DataFormatError(file, None, f"index array file is missing; {_REBUILD}")
        size = file.stat().st_size
        if size != meta.get("bytes"):
            raise DataFormatError(
                file,
                None,
                f"{size} bytes, the manifest says {meta.get('bytes')} "
                f"(truncated or overwritten); {_REBUILD}",
            )
        if verify and _sha256(file) != meta.get("sha256"):
            raise DataFormatError(file, None, f"checksum mismatch (corrupted); {_REBUILD}")
        try:
            arr = np.load(file, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise DataFormatError(
                file, None, f"not a readable .npy array ({exc}); {_REBUILD}"
            ) from exc
        if arr.dtype.str != meta.get("dtype") or list(arr.shape) != meta.get("shape"):
            raise DataFormatError(
                file,
                None,
                f"array is {arr.dtype.str}{list(arr.shape)}, the manifest says "
                f"{meta.get('dtype')}{meta.get('shape')}; {_REBUILD}",
            )
        out[name] = arr
    return out
