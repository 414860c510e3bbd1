"""Settings: defaults from the papers, environment overrides, validation."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from pydantic import ValidationError

from service.core.settings import Settings, get_settings
from service.errors import ConfigurationError


def test_defaults_follow_the_papers() -> None:
    s = Settings()
    assert (s.pop_limit, s.bm25_k1, s.bm25_b, s.max_span) == (200, 1.2, 0.75, 10)
    assert s.admin_token is None


def test_the_librarys_defaults_are_the_settings_defaults() -> None:
    """Settings are read at the edges and passed down (tests/test_layers.py); a library
    caller that passes none gets what the service would with no setting changed."""
    from service.forest.kbest import UNIQUE_KBEST_TIME_BUDGET_S
    from service.index.bm25 import K1, B
    from service.index.build import DOCS_ANALYSIS, DOCS_TITLE_WEIGHT
    from service.mt.decoder import DecoderConfig
    from service.mt.training.rule_features import RULE_TABLE_LIMIT
    from service.mt.weights import DEFAULT_STATE_DIR

    d = {name: field.default for name, field in Settings.model_fields.items()}
    config = DecoderConfig()
    assert (d["bm25_k1"], d["bm25_b"], d["docs_analysis"], d["docs_title_weight"]) == (
        K1, B, DOCS_ANALYSIS, DOCS_TITLE_WEIGHT
    )  # fmt: skip
    assert (d["pop_limit"], d["max_span"], d["decoder_engine"]) == (
        config.pop_limit, config.max_span, config.engine
    )  # fmt: skip
    assert d["kbest_time_budget_s"] == UNIQUE_KBEST_TIME_BUDGET_S
    assert d["rule_table_limit"] == RULE_TABLE_LIMIT
    assert d["weights_state_dir"] == DEFAULT_STATE_DIR


def test_every_setting_a_method_names_exists_and_sets_its_parameter() -> None:
    from service.retrieval.base import SCORERS, configured_params, document_methods

    document_methods()  # the built-in scorers register themselves
    named = {(n, p): key for n, cls in SCORERS.items() for p, key in cls.configured.items()}  # type: ignore[attr-defined]
    assert named and all(key in Settings.model_fields for key in named.values()), named
    s = Settings(nbest_psq=7, bowfd_cascade=None)
    assert configured_params("psq", partial(getattr, s)) == {"nbest": 7}
    assert configured_params("bowfd", partial(getattr, s)) == {}  # unset: the method's default
    assert configured_params("dt", partial(getattr, s)) == {}
    with pytest.raises(ConfigurationError, match="choose one of"):
        configured_params("bm42", partial(getattr, s))


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


@pytest.mark.parametrize(
    ("env", "value", "named"),
    [
        ("CLIR_DOCS_TITLE_WEIGHT", "0", "CLIR_DOCS_TITLE_WEIGHT='0': Input should be greater"),
        ("CLIR_BM25_B", "5", "CLIR_BM25_B='5': Input should be less than or equal to 1"),
        ("CLIR_POP_LIMIT", "many", "CLIR_POP_LIMIT='many': Input should be a valid integer"),
        ("CLIR_ADMIN_TOKEN", "   ", "CLIR_ADMIN_TOKEN: "),
    ],
)
def test_an_invalid_setting_is_a_configuration_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, named: str
) -> None:
    from service.errors import ConfigurationError

    monkeypatch.setenv(env, value)
    get_settings.cache_clear()
    with pytest.raises(ConfigurationError, match="invalid setting") as info:
        get_settings()
    assert named in str(info.value)
    if env == "CLIR_ADMIN_TOKEN":
        assert repr(value) not in str(info.value)  # a secret is not echoed


def test_the_cli_reports_an_invalid_setting_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from service.cli import main
    from service.data import write_docs
    from service.records import Doc

    write_docs(tmp_path / "d.jsonl", [Doc("a", "Title", "some text", "s")])
    monkeypatch.setenv("CLIR_DOCS_TITLE_WEIGHT", "0")
    get_settings.cache_clear()
    out = tmp_path / "ix"
    assert main(["build-index", "--docs", str(tmp_path / "d.jsonl"), "--out", str(out)]) != 0
    assert not out.exists()
    err = capsys.readouterr().err
    assert err.startswith("clir: error: invalid setting(s): CLIR_DOCS_TITLE_WEIGHT='0'")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("value", "paths"),
    [
        ("/srv/coll", [Path("/srv/coll")]),  # a plain path, as people write it
        ("/srv/a, indexes/demo", [Path("/srv/a"), Path("indexes/demo")]),
        ('["/srv/a", "indexes/demo"]', [Path("/srv/a"), Path("indexes/demo")]),
        ("", []),
    ],
)
def test_path_lists_take_a_path_a_comma_list_or_json(
    monkeypatch: pytest.MonkeyPatch, value: str, paths: list[Path]
) -> None:
    for env in ("CLIR_DOC_INDEXES", "CLIR_POOL_INDEXES", "CLIR_MODEL_BUNDLES"):
        monkeypatch.setenv(env, value)
    get_settings.cache_clear()
    s = get_settings()
    assert s.doc_indexes == s.pool_indexes == s.model_bundles == paths


def test_a_bad_path_list_is_one_sentence_at_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from service.cli import main

    monkeypatch.setenv("CLIR_DOC_INDEXES", '["indexes/demo"')
    get_settings.cache_clear()
    assert main(["serve", "--port", "1"]) != 0
    err = capsys.readouterr().err
    assert err.startswith("clir: error: invalid setting(s): CLIR_DOC_INDEXES='[\"indexes/demo\"'")
    assert "a JSON list such as" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_the_deprecated_queue_timeout_is_unset_by_default() -> None:
    s = Settings()
    assert s.queue_timeout_s is None and s.queue_size == 1000
    assert s.max_doc_bytes == 1024 * 1024
