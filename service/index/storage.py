"""On-disk format of an index: a directory of ``.npy`` arrays plus ``manifest.json``.

The manifest holds the format version, the build parameters and, for every array, its file
name, dtype, shape, byte size and SHA-256. Writing is atomic: everything goes into a
temporary directory beside the target, is fsynced, and only then renamed into place, so a
crash never leaves a half-written index under the final name (an existing index being
replaced is moved aside first and removed after the rename). Loading memory-maps the arrays
and checks each file against the manifest; a missing, truncated or corrupted file is a
:class:`~service.errors.DataFormatError` naming that file. The writing and reading are
:mod:`service.core.arraydir`'s (shared with the grammar and the LM table cache); this module
fixes the index's format name, version and JSON layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from service.core import arraydir
from service.core.arraydir import MANIFEST

FORMAT_NAME = "clir-inverted-index"
FORMAT_VERSION = 1

Manifest = dict[str, Any]
_REBUILD = "rebuild the index (clir build-index ... --force)"

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MANIFEST",
    "Manifest",
    "load_arrays",
    "read_manifest",
    "write_index_dir",
]


def write_index_dir(out: str | Path, arrays: Mapping[str, np.ndarray], manifest: Manifest) -> None:
    """Write ``arrays`` and ``manifest`` (plus the array table) to ``out`` atomically."""
    full = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, **manifest}
    arraydir.write_array_dir(out, arrays, full, indent=2, sort_keys=True)


def read_manifest(path: str | Path) -> Manifest:
    """The manifest of the index directory ``path``, checked for format and version."""
    return arraydir.read_manifest(
        path,
        what="index",
        format_name=FORMAT_NAME,
        version_key="format_version",
        version=FORMAT_VERSION,
        hint=_REBUILD,
    )


def load_arrays(
    path: str | Path, manifest: Manifest, verify: bool = False
) -> dict[str, np.ndarray]:
    """Memory-map every array of the manifest, checking size, dtype and shape (and the
    SHA-256 when ``verify``); any mismatch is a DataFormatError naming the file."""
    return arraydir.load_arrays(path, manifest, verify=verify, hint=_REBUILD)
