"""The hashed locks in ``requirements/`` agree with ``constraints.txt`` and cover what each
environment installs: `make` and docker/Dockerfile install every package with
``pip install --require-hashes -r requirements/<env>.txt`` (pip then refuses a file whose sha256
is not the lock's), and ``constraints.txt`` keeps pinning the build tools of source packages."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REQS = ROOT / "requirements"
ENVS = ("tools", "serve", "train", "dev", "image")

# `name==version ; marker` at the start of a line; a hashed lock continues it with `\`.
PIN = re.compile(
    r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)(?:\s*;\s*([^\\]+?))?\s*\\?$"
)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[tuple[str, str], str]:
    """(package, marker) -> version of every pin in a lock or constraints file."""
    found: dict[tuple[str, str], str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = PIN.match(line)
        if match:
            found[(normalize(match.group(1)), (match.group(3) or "").strip())] = match.group(2)
    return found


def entries(path: Path) -> list[list[str]]:
    """Each requirement of a hashed lock with its continuation lines."""
    blocks: list[list[str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if PIN.match(line):
            blocks.append([line])
        elif blocks and line.startswith("    --hash="):
            blocks[-1].append(line)
    return blocks


def names(env: str) -> set[str]:
    return {name for name, _ in pins(REQS / f"{env}.txt")}


def requirement_name(spec: str) -> str:
    return normalize(re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0])


@pytest.mark.parametrize("env", ENVS)
def test_every_package_of_a_lock_has_hashes(env: str) -> None:
    blocks = entries(REQS / f"{env}.txt")
    assert blocks, env
    for block in blocks:
        assert len(block) > 1 and all(
            re.fullmatch(r"    --hash=sha256:[0-9a-f]{64}( \\)?", h) for h in block[1:]
        ), block[0]


@pytest.mark.parametrize("env", ENVS)
def test_a_lock_pins_what_constraints_txt_pins(env: str) -> None:
    # (a marker may differ: each lock resolves its own subset, the versions may not)
    constraints: dict[str, set[str]] = {}
    for (name, _), version in pins(ROOT / "constraints.txt").items():
        constraints.setdefault(name, set()).add(version)
    locked = pins(REQS / f"{env}.txt")
    assert locked
    for (name, _), version in locked.items():
        assert version in constraints.get(name, set()), (env, name, version)


def test_each_environment_gets_its_dependencies_and_no_more() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    base = {requirement_name(s) for s in project["dependencies"]}
    extras = {
        extra: {requirement_name(s) for s in specs if not s.startswith(project["name"])}
        for extra, specs in project["optional-dependencies"].items()
    }
    tools = {"pip", "setuptools", "wheel"}
    assert tools <= names("tools") and not base & names("tools")
    assert base | tools <= names("serve")
    assert not (extras["train"] | extras["ray"] | extras["dev"]) & names("serve")  # no compiler
    assert base | extras["train"] <= names("train") and not extras["ray"] & names("train")
    assert base | extras["train"] | extras["ray"] | extras["dev"] <= names("dev")
    assert base | extras["train"] | extras["ray"] <= names("image")
    assert not {"pytest", "hypothesis", "mypy", "ruff", "selenium"} & names("image")


def test_make_and_the_dockerfile_install_from_the_hashed_locks() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "PIP_LOCKED := $(BIN)/python -m pip install --quiet --require-hashes" in makefile
    for env in ("serve", "train", "dev"):
        assert f"$(PIP_LOCKED) $(REQS)/{env}.txt" in makefile
    # a new venv's pip predates --build-constraint: the locked pip goes in first
    first = makefile.index("pip install --quiet --require-hashes -r $(REQS)/tools.txt")
    assert first < makefile.index("$(PIP_LOCKED) $(REQS)/serve.txt")
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text(encoding="utf-8")
    assert "ARG LOCK=requirements/image.txt" in dockerfile
    assert "pip install --require-hashes -r lock.txt" in dockerfile
    assert dockerfile.index("-r tools.txt") < dockerfile.index("-r lock.txt")
    # the project itself goes in without dependencies: nothing unhashed slips in
    assert "pip install --no-deps ." in dockerfile and "pip check" in dockerfile
