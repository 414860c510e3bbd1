"""Fixtures shared by this folder's tiers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from service.core.settings import Settings
from service.jobs.store import JobStore
from service.mt.bundle import ModelBundle


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(job_store=tmp_path / "jobs.sqlite3", worker_poll_s=0.05)


@pytest.fixture
def store(settings: Settings) -> JobStore:
    return JobStore(settings.job_store)


@pytest.fixture
def bundle_copy(toy_bundle: ModelBundle, tmp_path: Path) -> Path:
    """A private copy of the toy bundle (tests here write weights versions into it)."""
    return Path(shutil.copytree(toy_bundle.path, tmp_path / "de-en"))
