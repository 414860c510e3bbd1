"""The container set-up: ``docker-compose config`` (Debian's docker-compose,
installed by ``make compose``) must accept docker-compose.yml, and the parsed result must have
the api and worker services on one image sharing the models and job-store volumes, a non-root
user, the health check on /healthz and the Ray head only in the ``ray`` profile. The Dockerfile
is checked as text (no Docker engine runs here, so no image is built)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.process  # docker-compose config, for every test here
TOKEN = "compose-test-token"


def compose_config(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.fail("docker-compose is not installed: run `make compose` (Debian docker-compose)")
    empty = tmp_path / "empty.env"  # no .env of the developer's leaks in
    empty.write_text("", encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CLIR_", "COMPOSE_"))}
    return subprocess.run(
        [exe, "--env-file", str(empty), "-f", str(ROOT / "docker-compose.yml"), "config"],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    result = compose_config(tmp_path_factory.mktemp("compose"), {"CLIR_ADMIN_TOKEN": TOKEN})
    assert result.returncode == 0, result.stderr
    parsed: dict[str, Any] = yaml.safe_load(result.stdout)
    return parsed


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> volume name (or host path) of a service's volumes."""
    out = {}
    for volume in service["volumes"]:
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        else:
            source, target = volume["source"], volume["target"]
        out[target] = source
    return out


def test_api_and_worker_share_one_image_and_the_volumes(config: dict[str, Any]) -> None:
    services = config["services"]
    api, worker = services["api"], services["worker"]
    assert api["image"] == worker["image"] == services["ray-head"]["image"]
    assert api["build"]["dockerfile"] == "docker/Dockerfile"
    for service in (api, worker):
        assert mounts(service)["/app/models"] == "models"
        assert mounts(service)["/app/var"] == "jobs"
        assert service["environment"]["CLIR_JOB_STORE"] == "/app/var/jobs.sqlite3"
    assert {"models", "indexes", "jobs"} <= set(config["volumes"])


def test_the_api_serves_and_leaves_jobs_to_the_worker(config: dict[str, Any]) -> None:
    api, worker = config["services"]["api"], config["services"]["worker"]
    assert api["command"][:2] == ["clir", "serve"] and "0.0.0.0" in api["command"]
    assert api["environment"]["CLIR_EMBEDDED_WORKER"] == "false"
    assert worker["command"] == ["clir", "worker"]
    assert api["environment"]["CLIR_ADMIN_TOKEN"] == TOKEN  # from the environment
    assert "CLIR_ADMIN_TOKEN" not in worker["environment"]  # the worker needs no token


def test_services_run_as_the_images_non_root_user(config: dict[str, Any]) -> None:
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text(encoding="utf-8")
    uid = re.search(r"^ARG UID=(\d+)$", dockerfile, re.M)
    assert uid is not None and int(uid.group(1)) != 0
    for name, service in config["services"].items():
        assert service["user"] == f"{uid.group(1)}:{uid.group(1)}", name


def test_the_api_health_check_asks_healthz(config: dict[str, Any]) -> None:
    check = config["services"]["api"]["healthcheck"]
    assert check["test"][0] == "CMD" and "http://127.0.0.1:8000/healthz" in check["test"][-1]


def test_the_ray_head_is_only_in_the_ray_profile(config: dict[str, Any]) -> None:
    services = config["services"]
    head = services["ray-head"]
    assert head["profiles"] == ["ray"]
    assert head["command"][:4] == ["ray", "start", "--head", "--block"]
    assert "profiles" not in services["api"] and "profiles" not in services["worker"]
    port = next(a.split("=")[1] for a in head["command"] if a.startswith("--port="))
    assert services["worker"]["environment"]["CLIR_RAY_ADDRESS"] == f"ray-head:{port}"
    assert mounts(head)["/app/models"] == "models"  # Ray tasks read the same bundles


def test_a_missing_admin_token_is_refused(tmp_path: Path) -> None:
    result = compose_config(tmp_path, {})
    assert result.returncode != 0 and "set CLIR_ADMIN_TOKEN" in result.stderr


def dockerfile_stages() -> list[list[str]]:
    """The Dockerfile's instructions (continuation lines joined), split into stages."""
    text = (ROOT / "docker" / "Dockerfile").read_text(encoding="utf-8")
    lines = re.sub(r"\\\n", " ", text).splitlines()
    stages: list[list[str]] = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_the_dockerfile_builds_in_one_stage_and_runs_in_another() -> None:
    builder, runtime = dockerfile_stages()
    text = (ROOT / "docker" / "Dockerfile").read_text(encoding="utf-8")
    assert "ARG PYTHON_IMAGE=python:3.11-slim-bookworm" in text
    assert builder[0] == "FROM ${PYTHON_IMAGE} AS builder"
    assert runtime[0] == "FROM ${PYTHON_IMAGE} AS runtime"
    builder_text = " ".join(builder)
    assert "build-essential" in builder_text and "zlib1g-dev" in builder_text
    assert "import kenlm, eflomal" in builder_text  # both compiled and importable
    runtime_text = " ".join(runtime)
    assert "build-essential" not in runtime_text  # no compiler in the image that runs
    assert "COPY --from=builder /opt/venv /opt/venv" in runtime


def test_the_runtime_stage_is_non_root_healthchecked_and_serves_on_all_interfaces() -> None:
    runtime = dockerfile_stages()[-1]
    users = [i for i in runtime if i.startswith("USER ")]
    assert users == ["USER clir"]
    cmd = runtime[-1]
    assert cmd == 'CMD ["clir", "serve", "--host", "0.0.0.0", "--port", "8000"]'
    assert runtime.index(users[0]) < runtime.index(cmd)
    (health,) = [i for i in runtime if i.startswith("HEALTHCHECK ")]
    assert "http://127.0.0.1:8000/healthz" in health


def test_the_build_context_leaves_the_big_models_out() -> None:
    ignore = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert "models/*" in ignore and "!models/demo-de-en" in ignore
    assert "indexes/*" in ignore and ".venv" in ignore
    # what the Dockerfile copies in is exactly what the ignore file lets through
    runtime = dockerfile_stages()[-1]
    copied = {i.split()[2] for i in runtime if i.startswith("COPY --chown")}
    assert copied == {"models/demo-de-en", "indexes/demo", "indexes/demo-pool"}
    for path in copied:
        assert (ROOT / path).is_dir(), path


def test_ray_nodes_join_the_head_with_the_token(tmp_path: Path) -> None:
    """Every Ray process of the ``ray`` profile gets the same token (Ray 2.60 refuses a node or
    driver without it), the nodes join the head, and the api can fan searches out to them."""
    result = compose_config(
        tmp_path, {"CLIR_ADMIN_TOKEN": TOKEN, "CLIR_RAY_TOKEN": "tok", "COMPOSE_PROFILES": "ray"}
    )
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    node = services["ray-node"]
    assert node["profiles"] == ["ray"]
    assert node["command"][:3] == ["ray", "start", "--address=ray-head:6379"]
    for name in ("api", "worker", "ray-head", "ray-node"):
        env = services[name]["environment"]
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"] == "tok", name
    assert services["api"]["environment"]["CLIR_RAY_ADDRESS"] == "ray-head:6379"
    mounts = {str(v).split(":")[0] if isinstance(v, str) else v["source"] for v in node["volumes"]}
    assert {"models", "indexes"} <= mounts
