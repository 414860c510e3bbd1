"""The admin API: bearer-token access (401/403/503, the token never echoed or logged), jobs
(submit, follow, list, cancel, 409 for a second job on one model), models and activation (a
corrupt version refused while the old one serves; a new version serves without a restart), the
job gauges of /metrics, and ids or version names that try to leave their directories."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.core.settings import Settings
from service.jobs.store import JobStore
from service.jobs.worker import run_worker
from service.mt.bundle import weights_store
from service.mt.weights import WeightsStore
from service.retrieval.bowfd import IR_FEATURE
from tests.api.conftest import MakeClient

TOKEN = "tok-3f9a7c1e-admin-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HOUSE = "das haus ist groß"


@pytest.fixture
def admin(make_client: MakeClient, bundle_copy: Path) -> TestClient:
    return make_client(admin_token=TOKEN, model_bundles=[bundle_copy])


def settings_of(client: TestClient) -> Settings:
    settings: Settings = client.app.state.settings  # type: ignore[attr-defined]
    return settings


def store_of(client: TestClient) -> JobStore:
    return JobStore(settings_of(client).job_store)


def ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


# --- access ----------------------------------------------------------------------------------

ROUTES = [
    ("GET", "/v1/admin/jobs"),
    ("GET", "/v1/admin/jobs/" + "0" * 32),
    ("DELETE", "/v1/admin/jobs/" + "0" * 32),
    ("GET", "/v1/admin/models"),
    ("POST", "/v1/admin/models/default/activate"),
    ("POST", "/v1/admin/train"),
    ("POST", "/v1/admin/selftest"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_missing_token_is_401_with_challenge(admin: TestClient, method: str, path: str) -> None:
    r = admin.request(method, path)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_wrong_token_is_403(admin: TestClient, method: str, path: str) -> None:
    r = admin.request(method, path, headers={"Authorization": "Bearer " + TOKEN[:-1] + "X"})
    assert r.status_code == 403
    assert r.json() == {"detail": "the admin token is not valid"}


@pytest.mark.parametrize(
    "header", [f"Basic {TOKEN}", TOKEN, "Bearer", f"bearer{TOKEN}", "Bearer  "]
)
def test_malformed_authorization_is_401(admin: TestClient, header: str) -> None:
    assert admin.get("/v1/admin/jobs", headers={"Authorization": header}).status_code == 401


def test_non_ascii_token_is_403_not_500(admin: TestClient) -> None:
    r = admin.get("/v1/admin/jobs", headers={"Authorization": "Bearer t\u00f6ken".encode()})
    assert r.status_code == 403


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_admin_disabled_without_a_configured_token(
    make_client: MakeClient, method: str, path: str
) -> None:
    client = make_client()
    r = client.request(method, path, headers=AUTH)
    assert r.status_code == 503
    assert r.json() == {"detail": "admin API disabled: set CLIR_ADMIN_TOKEN"}


def test_right_token_passes(admin: TestClient) -> None:
    assert ok(admin.get("/v1/admin/jobs", headers=AUTH)) == {"data": [], "count": 0}


def test_the_token_is_never_logged_or_returned(
    admin: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = {"Authorization": "Bearer " + TOKEN + "-wrong"}
    responses = [
        admin.get("/v1/admin/jobs", headers=wrong),
        admin.get("/v1/admin/jobs", headers=AUTH),
        admin.get("/v1/admin/jobs/" + "0" * 32, headers=AUTH),
        admin.get("/v1/admin/jobs/nope", headers=AUTH),
        admin.post("/v1/admin/selftest", json={"steps": 1, "seconds": 0}, headers=AUTH),
        admin.post("/v1/admin/models/nope/activate", headers=AUTH),
        admin.post("/v1/admin/models/nope/activate", headers=wrong),
        admin.get("/metrics"),
    ]
    run_worker(settings_of(admin), once=True)
    assert {r.status_code for r in responses} == {200, 202, 403, 404, 422}
    for r in responses:
        assert TOKEN not in r.text and TOKEN not in str(r.headers)
    assert caplog.records  # the requests were logged
    for record in caplog.records:
        assert TOKEN not in record.getMessage()
        assert TOKEN not in str(record.__dict__)
    assert TOKEN not in caplog.text
    assert TOKEN not in admin.get("/openapi.json").text


# --- jobs ----------------------------------------------------------------------------------------


def test_job_lifecycle_over_http(admin: TestClient) -> None:
    job = ok(admin.post("/v1/admin/selftest", json={"steps": 2, "seconds": 0}, headers=AUTH), 202)
    assert (job["kind"], job["state"], job["progress"], job["model"]) == (
        "selftest",
        "queued",
        0.0,
        None,
    )
    listed = ok(admin.get("/v1/admin/jobs?state=queued", headers=AUTH))
    assert [j["id"] for j in listed["data"]] == [job["id"]] and listed["count"] == 1
    assert run_worker(settings_of(admin), once=True) == 1
    done = ok(admin.get(f"/v1/admin/jobs/{job['id']}", headers=AUTH))
    assert (done["state"], done["progress"], done["error"]) == ("succeeded", 1.0, None)
    assert [e["epoch"] for e in done["epochs"]] == [1, 2]
    assert done["epochs"][1]["metrics"] == {"step": 2.0}
    assert done["result"] == {"version": None, "model": None, "metrics": {"steps": 2.0}}
    assert done["finished_at"] is not None and done["started_at"] is not None
    assert ok(admin.get("/v1/admin/jobs?state=queued", headers=AUTH))["count"] == 0
    r = admin.delete(f"/v1/admin/jobs/{job['id']}", headers=AUTH)
    assert r.status_code == 409 and "already succeeded" in r.json()["detail"]


def test_cancel_queued_is_200_and_running_is_202(admin: TestClient) -> None:
    store = store_of(admin)
    queued = ok(admin.post("/v1/admin/selftest", json={"steps": 1}, headers=AUTH), 202)
    body = ok(admin.delete(f"/v1/admin/jobs/{queued['id']}", headers=AUTH), 200)
    assert (body["state"], body["cancel_requested"]) == ("cancelled", True)
    running = store.submit("selftest", {"steps": 5})
    store.claim_next(12345)
    body = ok(admin.delete(f"/v1/admin/jobs/{running.id}", headers=AUTH), 202)
    assert (body["state"], body["cancel_requested"]) == ("running", True)


def test_second_job_for_one_model_is_409(admin: TestClient, bundle_copy: Path) -> None:
    body = {"steps": 5, "seconds": 0, "lang": "de"}
    first = ok(admin.post("/v1/admin/selftest", json=body, headers=AUTH), 202)
    assert first["model"] == str(bundle_copy)
    r = admin.post("/v1/admin/selftest", json=body, headers=AUTH)
    assert r.status_code == 409
    assert first["id"] in r.json()["detail"] and "already has a queued" in r.json()["detail"]
    ok(admin.post("/v1/admin/selftest", json={"steps": 1}, headers=AUTH), 202)  # no model
    r = admin.post("/v1/admin/selftest", json={"lang": "zh"}, headers=AUTH)
    assert r.status_code == 422 and "loaded languages: de" in r.json()["detail"]


@pytest.mark.parametrize(
    ("query", "status"), [("state=bogus", 422), ("limit=0", 422), ("limit=1001", 422)]
)
def test_bad_list_parameters(admin: TestClient, query: str, status: int) -> None:
    assert admin.get(f"/v1/admin/jobs?{query}", headers=AUTH).status_code == status


@pytest.mark.parametrize(
    ("job_id", "statuses"),
    [
        ("0" * 32, {404}),
        ("not-a-job", {422}),
        ("..%2F..%2Fjobs.sqlite3", {404, 422}),
        ("../../etc/passwd", {404}),
        ("%2e%2e", {422}),
    ],
)
def test_job_ids_are_checked(admin: TestClient, job_id: str, statuses: set[int]) -> None:
    for method in ("GET", "DELETE"):
        r = admin.request(method, f"/v1/admin/jobs/{job_id}", headers=AUTH)
        assert r.status_code in statuses, (method, r.status_code, r.text)


def test_unavailable_job_store_is_503_naming_it(make_client: MakeClient, tmp_path: Path) -> None:
    bad = tmp_path / "corrupt.sqlite3"
    bad.write_bytes(b"garbage, not SQLite " * 50)
    client = make_client(admin_token=TOKEN, job_store=bad)
    r = client.get("/v1/admin/jobs", headers=AUTH)
    assert r.status_code == 503
    assert "corrupt.sqlite3" in r.json()["detail"]
    assert client.get("/metrics").status_code == 200  # the gauges are left out, not a 500


def test_metrics_show_jobs_by_state(admin: TestClient) -> None:
    text = admin.get("/metrics").text
    assert 'clir_jobs{state="queued"} 0' in text
    assert not settings_of(admin).job_store.exists()  # /metrics creates no store
    store = store_of(admin)
    for _ in range(3):
        store.submit("selftest", {"steps": 1, "seconds": 0})
    run_worker(settings_of(admin), once=True)
    text = admin.get("/metrics").text
    assert "# TYPE clir_jobs gauge" in text
    assert 'clir_jobs{state="queued"} 2' in text
    assert 'clir_jobs{state="succeeded"} 1' in text
    assert 'clir_jobs{state="running"} 0' in text


def test_train_refuses_paths_outside_the_data_directory(admin: TestClient) -> None:
    r = admin.post(
        "/v1/admin/train", json={"lang": "de", "queries": "../../etc/passwd"}, headers=AUTH
    )
    assert r.status_code == 422, r.text
    assert "queries must be a file under the data directory" in r.json()["detail"]
    assert admin.get("/v1/admin/jobs", headers=AUTH).json()["count"] == 0
    r = admin.post("/v1/admin/train", json={"lang": "de", "unknown": 1}, headers=AUTH)
    assert r.status_code == 422, r.text


def test_train_takes_a_language_as_search_does(admin: TestClient) -> None:
    # any case: the job is queued for the de model (the paths then fail on this toy setup,
    # after the language was understood)
    upper = admin.post("/v1/admin/train", json={"lang": "DE", "epochs": "x"}, headers=AUTH)
    lower = admin.post("/v1/admin/train", json={"lang": "de", "epochs": "x"}, headers=AUTH)
    assert upper.status_code == lower.status_code == 422
    assert upper.json()["detail"] == lower.json()["detail"]
    # a language without a model: 422 naming it, as search and activation answer
    r = admin.post("/v1/admin/train", json={"lang": "zh"}, headers=AUTH)
    assert r.status_code == 422, r.text
    assert "no model is configured for language 'zh'" in r.json()["detail"]
    r = admin.post("/v1/admin/train", json={"lang": "fr"}, headers=AUTH)
    assert r.status_code == 422, r.text


# --- models and activation ---------------------------------------------------------------------


def search(client: TestClient) -> dict[str, Any]:
    """BOW-FD's own ranking (no feedback: its documents' weights are a softmax of the scores,
    which doubled weights would sharpen)."""
    body: dict[str, Any] = ok(
        client.post("/v1/search", json={"query": HOUSE, "lang": "de", "feedback": False})
    )
    return body


def test_full_flow_job_writes_a_version_that_serves_after_activation(
    admin: TestClient, bundle_copy: Path
) -> None:
    weights = weights_store(bundle_copy, settings_of(admin).weights_state_dir)
    old = weights.active_version()
    before = search(admin)
    assert before["weights_version"] == old

    job = ok(
        admin.post(
            "/v1/admin/selftest", json={"steps": 2, "seconds": 0, "lang": "de"}, headers=AUTH
        ),
        202,
    )
    assert run_worker(settings_of(admin), once=True) == 1
    done = ok(admin.get(f"/v1/admin/jobs/{job['id']}", headers=AUTH))
    assert done["state"] == "succeeded"
    new = done["weights_version"]
    assert new and new != old and done["result"]["version"] == new
    assert weights.active_version() == old  # a finished job does not activate by itself

    models = ok(admin.get("/v1/admin/models", headers=AUTH))
    (model,) = models["data"]
    assert (model["name"], model["lang"], model["active_version"]) == ("de-en", "de", old)
    by_name = {v["version"]: v for v in model["versions"]}
    assert by_name[new]["source"] == "selftest" and not by_name[new]["active"]
    assert by_name[new]["parent"] == old and by_name[old]["active"]

    # A version with every weight (and the IR weight v = 1) doubled: the same derivations win,
    # so every score doubles once it is active.
    doubled = {k: 2 * v for k, v in weights.load(old).weights.items()}
    doubled[IR_FEATURE] = 2.0
    weights.save(doubled, version="doubled", source="test")
    body = ok(admin.post("/v1/admin/models/doubled/activate?lang=de", headers=AUTH))
    assert body == {
        "model": "de-en",
        "lang": "de",
        "version": "doubled",
        "previous": old,
        "metrics": {},
    }
    after = search(admin)  # no restart
    assert after["weights_version"] == "doubled"
    assert after["cached"] is False  # cached forests are keyed by version
    assert "weights:doubled" in after["signature"]
    assert [h["id"] for h in after["results"]] == [h["id"] for h in before["results"]]
    for a, b in zip(after["results"], before["results"], strict=True):
        assert a["score"] == pytest.approx(2 * b["score"], rel=1e-9)

    ok(admin.post(f"/v1/admin/models/{new}/activate?model=de-en", headers=AUTH))
    assert search(admin)["weights_version"] == new
    ok(admin.post(f"/v1/admin/models/{old}/activate", headers=AUTH))  # the only model
    again = search(admin)
    assert again["weights_version"] == old and again["cached"] is True


def test_a_version_with_per_term_ir_weights_serves(admin: TestClient, bundle_copy: Path) -> None:
    # the sparse IR features of Hieber & Riezler 2015, §3: a large weight on "home" (d2's word)
    # lifts d2 over d1, which the default weights rank first for "das haus ist groß"
    weights = weights_store(bundle_copy, settings_of(admin).weights_state_dir)
    old = weights.active_version()
    before = [h["id"] for h in search(admin)["results"]]
    assert before[0] == "d1" and "d2" in before
    boosted = {**weights.load(old).weights, IR_FEATURE: 1.0, "ir:home": 20.0}
    weights.save(boosted, version="home", source="test")
    ok(admin.post("/v1/admin/models/home/activate?lang=de", headers=AUTH))
    after = search(admin)
    assert after["weights_version"] == "home"
    assert after["results"][0]["id"] == "d2"


def test_a_learned_version_not_offered_needs_force(admin: TestClient, bundle_copy: Path) -> None:
    weights = weights_store(bundle_copy, settings_of(admin).weights_state_dir)
    old = weights.active_version()
    metrics = {"activation_offered": 0.0, "heldout_map_gain": -0.0031, "heldout_queries": 406.0,
               "heldout_p_map": 0.04}  # fmt: skip
    weights.save(weights.load(old).weights, version="lost", source="ltr", metrics=metrics)
    r = admin.post("/v1/admin/models/lost/activate?lang=de", headers=AUTH)
    assert r.status_code == 409, r.text
    assert "not offered for activation" in r.text and "-0.0031" in r.text and "406" in r.text
    assert "activate?force=true" in r.json()["detail"]  # how to do it anyway, in REST's words
    assert weights.active_version() == old and search(admin)["weights_version"] == old
    body = ok(admin.post("/v1/admin/models/lost/activate?lang=de&force=true", headers=AUTH))
    assert body["version"] == "lost" and search(admin)["weights_version"] == "lost"


def save_lex_version(weights: WeightsStore, name: str = "lex") -> str:
    """A version as ``train-ltr --lex`` writes one: LEX weights beside the SMT weights (a large
    weight on translating "haus" as "home" lifts d2, "home", over d1, "house")."""
    active = weights.load(weights.active_version()).weights
    weights.save({**active, IR_FEATURE: 1.0, "lex:haus_home": 20.0}, version=name, source="test")
    return name


def test_a_lex_version_activates_and_serves_bowfd(admin: TestClient, bundle_copy: Path) -> None:
    weights = weights_store(bundle_copy, settings_of(admin).weights_state_dir)
    before = search(admin)
    assert before["results"][0]["id"] == "d1"
    ok(admin.post(f"/v1/admin/models/{save_lex_version(weights)}/activate", headers=AUTH))
    after = search(admin)  # BOW-FD gets the grammar to read the LEX features from
    assert after["weights_version"] == "lex"
    assert after["results"][0]["id"] == "d2"
    for method in ("dt", "psq"):
        r = admin.post("/v1/search", json={"query": HOUSE, "lang": "de", "method": method})
        assert r.status_code == 200, r.text


def test_activation_refuses_a_version_the_service_cannot_score(
    admin: TestClient, bundle_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a service whose BOW-FD scorer is built without the grammar cannot score LEX weights:
    # activation must say so (409) instead of letting every later search fail
    from service.retrieval import versions
    from service.retrieval.base import get_scorer

    def without_grammar(method: str, index: Any, bundle: Any, **params: Any) -> Any:
        extra = {} if method == "bowfd" else {"bundle": bundle}
        return get_scorer(method, index, **extra, **params)

    monkeypatch.setattr(versions, "make_scorer", without_grammar)
    weights = weights_store(bundle_copy, settings_of(admin).weights_state_dir)
    old = weights.active_version()
    r = admin.post(f"/v1/admin/models/{save_lex_version(weights)}/activate", headers=AUTH)
    assert r.status_code == 409, r.text
    detail = r.json()["detail"]
    assert "'lex'" in detail and "bowfd" in detail and "LEX" in detail
    assert "keeps serving" in detail
    assert weights.active_version() == old
    assert search(admin)["weights_version"] == old


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_jobs_and_activation_leave_the_bundle_untouched(
    admin: TestClient, bundle_copy: Path
) -> None:
    shipped = tree_bytes(bundle_copy)
    body = {"steps": 1, "seconds": 0, "lang": "de"}
    job = ok(admin.post("/v1/admin/selftest", json=body, headers=AUTH), 202)
    assert run_worker(settings_of(admin), once=True) == 1
    new = ok(admin.get(f"/v1/admin/jobs/{job['id']}", headers=AUTH))["weights_version"]
    ok(admin.post(f"/v1/admin/models/{new}/activate", headers=AUTH))
    assert search(admin)["weights_version"] == new
    listed = ok(admin.get("/v1/admin/models", headers=AUTH))["data"][0]
    origins = {v["version"]: (v["origin"], v["active"]) for v in listed["versions"]}
    assert origins == {"default": ("bundle", False), new: ("state", True)}
    ok(admin.post("/v1/admin/models/default/activate", headers=AUTH))  # the bundle's own
    assert search(admin)["weights_version"] == "default"
    assert tree_bytes(bundle_copy) == shipped
    state = weights_store(bundle_copy, settings_of(admin).weights_state_dir).state
    assert state is not None and (state / f"{new}.json").is_file()
    assert (state / "ACTIVE").read_text() == "default\n"
    assert settings_of(admin).weights_state_dir in state.parents


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"version": "broken", "weights": {"LanguageModel": 0.5', "corrupted weights file"),
        ("", "corrupted weights file"),
        ('{"version": "broken", "weights": {"LanguageModel": "high"}}', "not a finite number"),
        ('{"version": "broken", "weights": {"NoSuchFeature": 1.0}}', "NoSuchFeature"),
        ('{"version": "other", "weights": {"LanguageModel": 1.0}}', "file names version"),
    ],
)
def test_a_bad_version_file_is_refused_and_the_old_one_keeps_serving(
    admin: TestClient, bundle_copy: Path, content: str, reason: str
) -> None:
    weights = weights_store(bundle_copy, settings_of(admin).weights_state_dir)
    old = weights.active_version()
    (bundle_copy / "weights" / "broken.json").write_text(content)
    r = admin.post("/v1/admin/models/broken/activate?lang=de", headers=AUTH)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "broken.json" in detail and reason in detail and "keeps serving" in detail
    assert weights.active_version() == old
    assert search(admin)["weights_version"] == old
    listed = ok(admin.get("/v1/admin/models", headers=AUTH))["data"][0]["versions"]
    broken = next(v for v in listed if v["version"] == "broken")
    if reason != "NoSuchFeature":  # a readable file with an unknown feature lists normally
        assert broken["error"] and "broken.json" in broken["error"]


@pytest.mark.parametrize(
    ("version", "statuses"),
    [
        ("..", {404, 422}),
        ("..%2F..%2Fmanifest", {404, 422}),
        ("%2e%2e%2fmanifest", {404, 422}),
        (".hidden", {422}),
        ("a..b", {422}),
        ("nope", {404}),
    ],
)
def test_version_names_cannot_leave_the_weights_directory(
    admin: TestClient, bundle_copy: Path, version: str, statuses: set[int]
) -> None:
    old = (bundle_copy / "weights" / "ACTIVE").read_bytes()
    r = admin.post(f"/v1/admin/models/{version}/activate?lang=de", headers=AUTH)
    assert r.status_code in statuses, r.text
    assert (bundle_copy / "weights" / "ACTIVE").read_bytes() == old


@pytest.mark.parametrize(
    ("query", "status", "text"),
    [
        ("lang=zh", 422, "no model is loaded for language 'zh'; loaded languages: de"),
        ("lang=fr", 422, "unknown language"),
        ("model=zh-en", 404, "no loaded model is named 'zh-en'"),
        ("lang=de&model=zh-en", 422, "is not the de model"),
    ],
)
def test_activation_target_must_be_a_loaded_model(
    admin: TestClient, query: str, status: int, text: str
) -> None:
    r = admin.post(f"/v1/admin/models/default/activate?{query}", headers=AUTH)
    assert r.status_code == status and text in r.json()["detail"]


# --- the embedded worker -----------------------------------------------------------------------


def admin_post_selftest(client: TestClient) -> Any:
    return client.post("/v1/admin/selftest", json={"steps": 2, "seconds": 0}, headers=AUTH)
