"""Tests of the LM table's on-disk cache (service.mt.lm.cache): memory-mapped, rebuilt when the
ARPA file changed, when it is damaged, of the previous format or unverified, never loaded
half-written, built in memory where it cannot be written, and kept in another directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from service.mt.lm import (
    TABLE_FORMAT,
    LmTable,
    build_lm_table,
    cache_path,
    load_lm_table,
)
from service.mt.lm.cache import STALE_TEMP_SECONDS
from service.mt.lm.table import ARRAYS
from tests.mt.lm.toy_lm import (
    TOY_ARPA,
    f32sum,
)

# --- the cache ---------------------------------------------------------------------------


def _arrays_equal(a: LmTable, b: LmTable) -> bool:
    names = ARRAYS
    return all(
        np.array_equal(getattr(a, n).view(np.uint8), getattr(b, n).view(np.uint8)) for n in names
    ) and dict(a.vocab) == dict(b.vocab)


def test_cache_is_written_then_memory_mapped(toy: Path) -> None:
    logs: list[str] = []
    first = load_lm_table(toy, log=logs.append)
    cache = toy.parent / "lm.table"
    assert cache == cache_path(toy)
    assert any("building" in m for m in logs) and first.verified
    manifest = json.loads((cache / "manifest.json").read_text())
    assert manifest["arpa"]["size"] == toy.stat().st_size
    assert manifest["arpa"]["mtime_ns"] == toy.stat().st_mtime_ns
    assert manifest["counts"] == [5, 3, 1] and manifest["verified"] is True
    assert manifest["table_size"] == len(first.keys)
    logs.clear()
    second = load_lm_table(toy, log=logs.append)
    assert logs == []
    assert all(isinstance(a, np.memmap) for a in second.arrays())
    assert _arrays_equal(first, second) and _arrays_equal(second, build_lm_table(toy))
    assert [p.name for p in toy.parent.iterdir() if p.name.startswith(".")] == []


def test_a_changed_arpa_file_is_rebuilt(toy: Path) -> None:
    load_lm_table(toy)
    logs: list[str] = []
    toy.write_text(TOY_ARPA.replace("-0.2\t<s> a b", "-0.9\t<s> a b"), encoding="utf-8")
    stat = toy.stat()
    os.utime(toy, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    table = load_lm_table(toy, log=logs.append)
    assert any("changed" in m for m in logs)
    assert table.logp10(("<s>", "a"), "b") == f32sum(-0.9)
    # touching it is a change too (the cache does not hash the file on every load)
    logs.clear()
    os.utime(toy, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    load_lm_table(toy, log=logs.append)
    assert any("changed" in m for m in logs)
    logs.clear()
    load_lm_table(toy, log=logs.append)
    assert logs == []


@pytest.mark.parametrize("damage", ["manifest", "truncate", "missing", "shape", "flags", "vocab"])
def test_a_damaged_cache_is_rebuilt(toy: Path, damage: str) -> None:
    load_lm_table(toy)
    good = build_lm_table(toy)  # in memory: rewriting a memory-mapped file would change it
    cache = cache_path(toy)
    if damage == "manifest":
        (cache / "manifest.json").write_text("{not json")
    elif damage == "truncate":
        keys = cache / "keys.npy"
        keys.write_bytes(keys.read_bytes()[:-8])
    elif damage == "missing":
        (cache / "backoffs.npy").unlink()
    elif damage == "shape":  # a consistent-looking file of the wrong length
        np.save(cache / "probs.npy", np.zeros(3, np.float32))
        manifest = json.loads((cache / "manifest.json").read_text())
        manifest["files"]["probs.npy"] = (cache / "probs.npy").stat().st_size
        (cache / "manifest.json").write_text(json.dumps(manifest))
    elif damage == "flags":  # the right length, the wrong type
        flags = np.load(cache / "left_ext.npy").astype(np.uint8)
        (cache / "left_ext.npy").unlink()
        np.save(cache / "left_ext.npy", flags)
        manifest = json.loads((cache / "manifest.json").read_text())
        manifest["files"]["left_ext.npy"] = (cache / "left_ext.npy").stat().st_size
        (cache / "manifest.json").write_text(json.dumps(manifest))
    else:
        (cache / "vocab.txt").write_text("<unk>\n<s>\n</s>\na\n")
    logs: list[str] = []
    table = load_lm_table(toy, log=logs.append)
    assert any("building" in m for m in logs), logs
    assert _arrays_equal(table, good)
    assert isinstance(table.keys, np.memmap)
    logs.clear()
    assert _arrays_equal(load_lm_table(toy, log=logs.append), good) and logs == []


def test_a_cache_of_the_previous_format_is_rebuilt(toy: Path) -> None:
    # format 1 had no left-extension flags
    load_lm_table(toy)
    cache = cache_path(toy)
    manifest = json.loads((cache / "manifest.json").read_text())
    assert manifest["format"] == TABLE_FORMAT == 2
    for name in ("left_ext.npy", "uni_left_ext.npy"):
        (cache / name).unlink()
        del manifest["files"][name]
    manifest["format"] = 1
    (cache / "manifest.json").write_text(json.dumps(manifest))
    logs: list[str] = []
    table = load_lm_table(toy, log=logs.append)
    assert any("another format" in m for m in logs), logs
    assert json.loads((cache / "manifest.json").read_text())["format"] == 2
    assert (cache / "left_ext.npy").is_file() and isinstance(table.left_ext, np.memmap)
    assert table.left_extends(("a", "b")) and not table.left_extends(("<s>", "a"))
    logs.clear()
    load_lm_table(toy, log=logs.append)
    assert logs == []


def test_an_unverified_cache_is_not_taken_when_verification_is_asked(toy: Path) -> None:
    assert not load_lm_table(toy, verify=False).verified
    logs: list[str] = []
    assert load_lm_table(toy, verify=False, log=logs.append).verified is False and logs == []
    assert load_lm_table(toy, verify=True, log=logs.append).verified
    assert any("not verified" in m for m in logs)


def test_a_half_written_cache_is_never_loaded(toy: Path) -> None:
    # what a crash leaves: a temporary directory without a manifest, no final directory
    tmp = toy.parent / ".lm.table.tmp-crashed"
    tmp.mkdir()
    (tmp / "keys.npy").write_bytes(b"\x93NUMPY garbage")
    old = toy.stat().st_mtime - 2 * STALE_TEMP_SECONDS
    os.utime(tmp, (old, old))
    logs: list[str] = []
    table = load_lm_table(toy, log=logs.append)
    assert any("building" in m for m in logs)
    assert table.logp10(("<s>", "a"), "b") == f32sum(-0.2)
    assert not tmp.exists()  # a stale leftover is removed


def test_an_unwritable_directory_builds_in_memory(
    toy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied", str(toy.parent))

    # (the tests may run as root, whom chmod cannot stop)
    monkeypatch.setattr(os, "mkdir", refuse)
    logs: list[str] = []
    table = load_lm_table(toy, log=logs.append)
    assert any("cannot write" in m and "in memory" in m for m in logs)
    assert not isinstance(table.keys, np.memmap) and table.verified
    assert not cache_path(toy).exists()
    assert table.logp10(("<s>", "a"), "b") == f32sum(-0.2)


def test_cache_dir(toy: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "cache"
    table = load_lm_table(toy, cache_dir=elsewhere)
    assert (elsewhere / "lm.table" / "manifest.json").is_file()
    assert not (toy.parent / "lm.table").exists()
    assert isinstance(table.keys, np.memmap)
