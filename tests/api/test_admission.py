"""Admission to the concurrency slots (service.api.admission): a request queues while it can
still finish within its time budget, is refused at once (503) when it cannot, and with 429 past
the queue's bound; through the API, many concurrent requests on one slot all get 200."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from service.api.admission import (
    AdmissionQueue,
    Decision,
    ServiceTimes,
    decide,
    expected_wait,
)
from service.api.serving import QueryService, decode_sentences
from service.api.telemetry import Metrics
from service.collection.searcher import SnapshotSearcher
from service.core.settings import Settings
from service.errors import OverloadedError, QueueFullError
from service.mt.bundle import ModelBundle
from service.mt.decoder import DecoderConfig
from tests.api.conftest import MakeClient

WAIT_S = 30.0


@pytest.mark.parametrize(
    ("ahead", "running", "slots", "service_s", "wait"),
    [
        (0, 0, 2, 1.0, 0.0),  # a free slot: no wait
        (0, 1, 2, 1.0, 0.0),
        (1, 0, 2, 1.0, 0.0),  # one queued ahead, two slots free: both start
        (0, 2, 2, 1.0, 0.5),  # the next of two slots frees in S/c
        (3, 2, 2, 1.0, 2.0),  # four slot-freeings of S/c
        (9, 8, 8, 0.4, 0.5),
    ],
)
def test_expected_wait(ahead: int, running: int, slots: int, service_s: float, wait: float) -> None:
    assert expected_wait(ahead, running, slots, service_s) == pytest.approx(wait)


def _decide(
    ahead: int, *, own_s: float = 0.5, budget_s: float = 5.0, queue_size: int = 1000
) -> Decision:
    return decide(
        ahead=ahead, running=8, slots=8, mean_s=0.4, own_s=own_s, budget_s=budget_s,
        queue_size=queue_size,
    )  # fmt: skip


def test_a_request_that_fits_in_its_budget_is_admitted_to_the_queue() -> None:
    decision = _decide(80)  # waits 81 * 0.4 / 8 = 4.05 s, + 0.5 s of work: 4.55 ≤ 5
    assert decision.admit and decision.reason is None
    assert decision.wait_s == pytest.approx(4.05)


def test_a_request_that_cannot_finish_in_its_budget_is_refused_with_the_reason() -> None:
    decision = _decide(100)  # waits 101 * 0.4 / 8 = 5.05 s: more than the budget alone
    assert not decision.admit and decision.status == 503
    assert decision.reason is not None
    assert "expected wait exceeds the time budget" in decision.reason
    assert "100 requests are queued" in decision.reason and "5 s budget" in decision.reason


def test_its_own_expected_time_counts_too() -> None:
    assert _decide(80, own_s=0.5).admit
    assert not _decide(80, own_s=1.0).admit  # 4.05 + 1.0 > 5


def test_past_the_queue_size_is_429() -> None:
    decision = _decide(10, queue_size=10)
    assert not decision.admit and decision.status == 429
    assert decision.reason is not None and "the queue is full" in decision.reason


def test_a_free_slot_always_runs_even_a_request_longer_than_the_budget() -> None:
    decision = decide(
        ahead=0, running=1, slots=2, mean_s=9.0, own_s=9.0, budget_s=5.0, queue_size=0
    )
    assert decision.admit and decision.wait_s == 0.0


def test_service_times_are_a_moving_average_per_kind() -> None:
    times = ServiceTimes(prior_s=0.2, alpha=0.5)
    assert times.estimate("search/dt") == 0.2  # the prior before any measurement
    times.observe("search/dt", 1.0)
    times.observe("search/dt", 0.0)
    assert times.estimate("search/dt") == pytest.approx(0.5)
    assert times.estimate("translate") == pytest.approx(0.5)  # unmeasured: the overall mean
    times.observe("translate", 2.0)
    assert times.estimate("translate") == pytest.approx(2.0)
    assert times.estimate() == pytest.approx(1.25)


def test_a_request_is_planned_as_a_slow_one_of_its_kind() -> None:
    times = ServiceTimes(prior_s=0.2, alpha=0.5, deviations=2.0)
    assert times.bound("search/bowfd") == 0.2  # the prior
    times.observe("search/bowfd", 1.0)
    assert times.bound("search/bowfd") == 1.0  # one measurement: no deviation yet
    times.observe("search/bowfd", 0.0)  # mean 0.5, mean deviation 0.5
    assert times.bound("search/bowfd") == pytest.approx(0.5 + 2 * 0.5)
    assert times.bound("translate") == pytest.approx(1.5)  # unmeasured: all kinds'
    steady = ServiceTimes(alpha=0.5)
    for _ in range(20):
        steady.observe("dt", 0.3)
    assert steady.bound("dt") == pytest.approx(0.3)  # no spread: the mean


class Hold:
    """Holds a slot until released."""

    def __init__(self, queue: AdmissionQueue) -> None:
        self.queue = queue
        self.started = threading.Event()
        self.done = threading.Event()

    def __call__(self) -> None:
        with self.queue.slot("hold"):
            self.started.set()
            assert self.done.wait(WAIT_S)


def test_a_queued_request_that_can_no_longer_finish_leaves_the_queue_with_503() -> None:
    refused: list[tuple[str, int]] = []
    queue = AdmissionQueue(
        1, 10, budget_s=0.5, times=ServiceTimes(prior_s=0.2),
        on_refused=lambda kind, status: refused.append((kind, status)),
    )  # fmt: skip
    hold = Hold(queue)
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(hold)
        assert hold.started.wait(WAIT_S)
        t0 = time.monotonic()
        with pytest.raises(OverloadedError) as info:
            queue.acquire("search/dt")  # expected 0.2 + 0.2 ≤ 0.5: queued, never served
        waited = time.monotonic() - t0
        hold.done.set()
        held.result(WAIT_S)
    assert 0.25 <= waited < 2.0  # it left at its latest start, 0.5 - 0.2 s after arrival
    assert "can no longer finish within the 0.5 s budget" in str(info.value)
    assert queue.queued == 0 and queue.running == 0
    assert refused == [("search/dt", 503)]  # told, as the service counts it


def test_a_request_refused_at_arrival_says_the_wait_exceeds_the_budget() -> None:
    queue = AdmissionQueue(1, 10, budget_s=0.3, retry_after_s=1, times=ServiceTimes(0.2))
    hold = Hold(queue)
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(hold)
        assert hold.started.wait(WAIT_S)
        t0 = time.monotonic()
        with pytest.raises(OverloadedError) as info:
            queue.acquire("x")  # 0.2 + 0.2 > 0.3
        assert time.monotonic() - t0 < 0.1  # at once, not after waiting
        assert not isinstance(info.value, QueueFullError)
        assert "the expected wait exceeds the time budget" in str(info.value)
        queue0 = AdmissionQueue(1, 0, budget_s=5.0)
        queue0.running = 1
        with pytest.raises(QueueFullError):
            queue0.acquire("x")
        hold.done.set()
        held.result(WAIT_S)


def test_requests_queue_in_order_and_all_finish_within_the_budget() -> None:
    queue = AdmissionQueue(1, 100, budget_s=5.0, times=ServiceTimes(prior_s=0.02))
    order: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        with queue.slot("w"):
            with lock:
                order.append(i)
            time.sleep(0.02)

    with ThreadPoolExecutor(12) as pool:
        futures = [pool.submit(work, i) for i in range(12)]
        for f in futures:
            f.result(WAIT_S)
    assert sorted(order) == list(range(12))
    assert queue.running == 0 and queue.queued == 0


def test_the_deprecated_queue_timeout_still_caps_the_wait() -> None:
    queue = AdmissionQueue(1, 10, budget_s=5.0, max_wait_s=0.05)
    hold = Hold(queue)
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(hold)
        assert hold.started.wait(WAIT_S)
        with pytest.raises(OverloadedError) as info:
            queue.acquire("x")
        assert "1 requests are in progress and none finished within 0.05 s" in str(info.value)
        hold.done.set()
        held.result(WAIT_S)


# --- through the API ------------------------------------------------------------------------


def test_many_concurrent_requests_on_one_slot_queue_and_all_get_200(
    make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_client(max_concurrency=1)
    real = SnapshotSearcher.rank

    def sleepy_rank(self: SnapshotSearcher, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.15)  # a slow search
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SnapshotSearcher, "rank", sleepy_rank)
    words = ["haus", "auto", "buch", "katze", "hund", "baum", "tisch", "stuhl"]
    bodies = [{"query": f"das {w}", "lang": "de", "method": "dt"} for w in words]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(lambda b: client.post("/v1/search", json=b), bodies))
    elapsed = time.perf_counter() - t0
    assert [r.status_code for r in answers] == [200] * len(bodies), [r.text for r in answers]
    assert elapsed >= 0.15 * len(bodies) * 0.9  # one at a time: they queued


def test_a_full_queue_is_429_with_retry_after(make_client: MakeClient) -> None:
    client = make_client(max_concurrency=1, queue_size=0)
    service: QueryService = client.app.state.service  # type: ignore[attr-defined]
    service.admission.running = 1  # the one slot is taken
    try:
        r = client.post("/v1/translate", json={"query": "das haus", "lang": "de"})
        busy = client.get("/metrics").text  # the gauges as the refusal left them
    finally:
        service.admission.running = 0
    assert r.status_code == 429, r.text
    # operators see refusals by kind and status, and the queue, in /metrics
    assert 'clir_admission_refused_total{kind="translate",status="429"} 1.0' in busy
    assert "clir_admission_running 1.0" in busy and "clir_admission_queued 0.0" in busy
    assert r.headers["retry-after"] == "1"
    assert "the queue is full" in r.json()["detail"]
    spec = client.get("/openapi.json").json()
    assert "429" in spec["paths"]["/v1/search"]["post"]["responses"]


def test_the_wait_for_a_slot_counts_against_the_decode_budget(toy_bundle: ModelBundle) -> None:
    decoder = toy_bundle.decoder(DecoderConfig())
    sentences: list[tuple[str, ...]] = [("das", "haus"), ("das", "auto")]
    times = iter([0.0, 0.1])  # the first sentence takes 0.1 s
    forests, reason = decode_sentences(decoder, sentences, 5.0, lambda: next(times), waited=4.9)
    assert len(forests) == 1  # 4.9 + 0.1 s: nothing left, the second sentence is skipped
    assert reason == (
        "time budget of 5 s exceeded (4.90 s of it waiting for a slot): sentences 2 of 2 skipped"
    )
    times = iter([0.0, 0.1])
    forests, reason = decode_sentences(decoder, sentences, 5.0, lambda: next(times))
    assert len(forests) == 2 and reason is None  # without the wait it fits


def test_run_tells_the_decode_how_long_its_request_waited() -> None:
    service = QueryService(Settings(max_concurrency=1), Metrics())
    assert service.queue_wait() == 0.0  # outside a request (the warm-up): nothing spent
    release = threading.Event()
    with ThreadPoolExecutor(2) as pool:
        held = pool.submit(service.run, lambda: release.wait(WAIT_S))
        while service.admission.running == 0:
            time.sleep(0.001)
        waiting = pool.submit(service.run, service.queue_wait)
        time.sleep(0.2)
        release.set()
        held.result(WAIT_S)
        assert 0.15 <= waiting.result(WAIT_S) < 2.0
    assert service.queue_wait() == 0.0
