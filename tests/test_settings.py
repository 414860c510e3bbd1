"""Settings: defaults from the papers, environment overrides, validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from service.settings import Settings, get_settings


def test_defaults_follow_the_papers() -> None:
    s = Settings()
    assert (s.pop_limit, s.bm25_k1, s.bm25_b, s.max_span) == (200, 1.2, 0.75, 10)
    assert s.admin_token is None


def test_environment_overrides_and_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLIR_POP_LIMIT", "50")
    monkeypatch.setenv("CLIR_ADMIN_TOKEN", "s3cret")
    s = get_settings()
    assert s.pop_limit == 50
    assert s.admin_token is not None and s.admin_token.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s)
    assert get_settings() is s


@pytest.mark.parametrize(
    ("field", "value"), [("pop_limit", 0), ("bm25_b", 1.5), ("admin_token", "  ")]
)
def test_invalid_values_are_rejected(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        Settings(**{field: value})  # type: ignore[arg-type]
