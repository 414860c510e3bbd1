"""Admission of query requests to the concurrency slots: queue while a request can still
finish within its time budget, refuse at once what cannot.

At most ``max_concurrency`` requests decode or rank at a time (:class:`AdmissionQueue`). A
request that finds every slot taken joins a FIFO queue — bounded, as Elasticsearch bounds its
search thread pool's queue (``thread_pool.search.queue_size``, 1,000) and answers 429 past it —
if its expected wait plus its own expected service time fits in ``request_time_budget_s``:

* **Service time** is measured, not configured: an exponentially weighted moving average of
  the seconds each request held its slot (:class:`ServiceTimes`), over all kinds for the rate
  at which the slots free up, and per kind of request (search by method, translate, suggest),
  plus twice its mean deviation, for the request's own cost: a request is planned to take as
  long as a slow one of its kind (as TCP's retransmission timer adds the round trip's
  variation to its mean, Jacobson 1988). Wall time under load already includes the
  contention of the requests running beside it.
* **Expected wait** (:func:`expected_wait`): ``c`` slots busy with requests of mean service
  time ``S`` free one slot every ``S / c`` seconds on average, so a request with ``q``
  requests queued ahead of it (and no free slot for it) starts after about ``(q + 1) · S / c``.
* **Decision** (:func:`decide`): a request that can start at once always runs (its decode has
  its own budget rule, :mod:`service.api.serving`); one that would queue is admitted when
  ``wait + own ≤ budget``, else refused at once (503, ``Retry-After``) with a detail that
  says why; past ``queue_size`` queued requests, refused with 429 (:class:`QueueFullError`).
* **Deadline in the queue**: a queued request that has not started by ``arrival + budget −
  own`` (the latest start at which it can still finish; the estimate is read again at every
  wake-up) leaves the queue with 503 instead of being served too late.

The deprecated ``queue_timeout_s``, when set, still caps the wait on top of this rule.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from service.core.settings import Settings
from service.errors import OverloadedError, QueueFullError

# the service time assumed before a kind of request has been measured (seconds)
PRIOR_SERVICE_S = 0.2
# weight of the newest measurement in the moving averages
EWMA_ALPHA = 0.1
# a request's own time is planned as its kind's mean plus this many mean deviations
DEVIATIONS = 2.0
ALL = "*"  # the key of the average over every kind


class ServiceTimes:
    """Moving averages (EWMA) of measured service seconds and of their absolute deviation
    from that mean, per kind and over all kinds — the smoothed round-trip time and its
    variation of TCP's retransmission timer (Jacobson 1988)."""

    def __init__(
        self, prior_s: float = PRIOR_SERVICE_S, alpha: float = EWMA_ALPHA,
        deviations: float = DEVIATIONS,
    ) -> None:  # fmt: skip
        self.prior_s = prior_s
        self.alpha = alpha
        self.deviations = deviations
        self._mean: dict[str, float] = {}
        self._dev: dict[str, float] = {}
        self._lock = threading.Lock()

    def observe(self, kind: str, seconds: float) -> None:
        """Add one measurement of a request of ``kind``."""
        a = self.alpha
        with self._lock:
            for key in (kind, ALL):
                mean = self._mean.get(key)
                if mean is None:
                    self._mean[key], self._dev[key] = seconds, 0.0
                    continue
                self._dev[key] += a * (abs(seconds - mean) - self._dev[key])
                self._mean[key] = mean + a * (seconds - mean)

    def estimate(self, kind: str = ALL) -> float:
        """The expected service seconds of a request of ``kind`` (the mean over all kinds,
        or the prior, until that kind has been measured)."""
        with self._lock:
            return self._mean.get(kind, self._mean.get(ALL, self.prior_s))

    def bound(self, kind: str) -> float:
        """The seconds a request of ``kind`` is planned to take: its mean plus
        ``deviations`` mean absolute deviations (a slow one of its kind still fits)."""
        with self._lock:
            key = kind if kind in self._mean else ALL
            if key not in self._mean:
                return self.prior_s
            return self._mean[key] + self.deviations * self._dev[key]


def expected_wait(ahead: int, running: int, slots: int, service_s: float) -> float:
    """Seconds until a slot is free for a request with ``ahead`` requests queued before it,
    ``running`` of ``slots`` slots taken, and ``service_s`` the mean service time."""
    free = max(0, slots - running)
    if ahead < free:
        return 0.0
    return (ahead - free + 1) * service_s / slots


@dataclass(frozen=True)
class Decision:
    """Whether a request joins (or skips) the queue, with the estimates behind it."""

    admit: bool
    wait_s: float  # expected wait for a slot
    service_s: float  # expected service time of the request itself
    reason: str | None = None  # why it was refused
    status: int = 200  # 503 (cannot finish in time) or 429 (queue full) when refused


def decide(
    *,
    ahead: int,
    running: int,
    slots: int,
    mean_s: float,
    own_s: float,
    budget_s: float,
    queue_size: int,
) -> Decision:
    """The admission rule, without clock or state: run at once when a slot is free for the
    request; otherwise queue it if the queue has room and ``wait + own_s ≤ budget_s``."""
    wait = expected_wait(ahead, running, slots, mean_s)
    if wait == 0.0:
        return Decision(True, 0.0, own_s)
    if ahead >= queue_size:
        reason = (
            f"the queue is full: {ahead} requests are waiting for {slots} slots "
            f"(at most {queue_size}, the setting CLIR_QUEUE_SIZE)"
        )
        return Decision(False, wait, own_s, reason, 429)
    if wait + own_s > budget_s:
        reason = (
            f"the expected wait exceeds the time budget: {ahead} requests are queued for "
            f"{slots} busy slots, about {wait:.2f} s of waiting plus {own_s:.2f} s of work, "
            f"more than the {budget_s:g} s budget (CLIR_REQUEST_TIME_BUDGET_S)"
        )
        return Decision(False, wait, own_s, reason, 503)
    return Decision(True, wait, own_s)


class AdmissionQueue:
    """``slots`` concurrent requests, a FIFO queue of at most ``queue_size`` behind them, and
    the budget rule of :func:`decide` at arrival and while waiting."""

    def __init__(
        self,
        slots: int,
        queue_size: int,
        budget_s: float,
        *,
        retry_after_s: float = 1.0,
        max_wait_s: float | None = None,
        times: ServiceTimes | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_refused: Callable[[str, int], None] | None = None,
    ) -> None:
        """``on_refused(kind, status)``: told of each refusal (the service counts them)."""
        self.slots = slots
        self.queue_size = queue_size
        self.budget_s = budget_s
        self.retry_after_s = retry_after_s
        self.max_wait_s = max_wait_s
        self.times = times or ServiceTimes()
        self.clock = clock
        self.on_refused = on_refused
        self.running = 0
        self._queue: deque[object] = deque()
        self._cond = threading.Condition()

    @property
    def queued(self) -> int:
        return len(self._queue)

    def _refuse(self, decision: Decision) -> OverloadedError:
        # a request like it fits again once the queue has drained by the excess
        excess = decision.wait_s + decision.service_s - self.budget_s
        retry = max(self.retry_after_s, excess)
        detail = f"the service is busy: {decision.reason}; retry after {math.ceil(retry)} s"
        cls = QueueFullError if decision.status == 429 else OverloadedError
        return cls(detail, retry_after=retry)

    def acquire(self, kind: str) -> None:
        """Take a slot for a request of ``kind``, queueing while it can still finish in time;
        raise :class:`OverloadedError` (503) or :class:`QueueFullError` (429) otherwise."""
        try:
            self._acquire(kind)
        except OverloadedError as exc:
            if self.on_refused is not None:
                self.on_refused(kind, 429 if isinstance(exc, QueueFullError) else 503)
            raise

    def _acquire(self, kind: str) -> None:
        with self._cond:
            arrival = self.clock()
            own = self.times.bound(kind)
            decision = decide(
                ahead=len(self._queue), running=self.running, slots=self.slots,
                mean_s=self.times.estimate(), own_s=own, budget_s=self.budget_s,
                queue_size=self.queue_size,
            )  # fmt: skip
            if not decision.admit:
                raise self._refuse(decision)
            if decision.wait_s == 0.0:
                self.running += 1
                return
            ticket = object()
            self._queue.append(ticket)
            try:
                while not (self._queue[0] is ticket and self.running < self.slots):
                    latest = arrival + self.budget_s - self.times.bound(kind)
                    timed_out = self.max_wait_s is not None and arrival + self.max_wait_s < latest
                    if timed_out:
                        latest = arrival + (self.max_wait_s or 0.0)
                    now = self.clock()
                    if now >= latest:
                        raise self._late(now - arrival, timed_out)
                    self._cond.wait(latest - now)
                self._queue.popleft()
                self.running += 1
            except BaseException:
                if ticket in self._queue:
                    self._queue.remove(ticket)
                raise
            finally:
                self._cond.notify_all()  # the next in line may start, or moved up

    def _late(self, waited: float, timed_out: bool) -> OverloadedError:
        if timed_out:
            reason = (
                f"{self.running} requests are in progress and none finished within "
                f"{self.max_wait_s:g} s (CLIR_QUEUE_TIMEOUT_S)"
            )
        else:
            reason = (
                f"the request waited {waited:.2f} s for one of {self.slots} slots and can no "
                f"longer finish within the {self.budget_s:g} s budget (CLIR_REQUEST_TIME_BUDGET_S)"
            )
        retry = self.retry_after_s
        return OverloadedError(
            f"the service is busy: {reason}; retry after {math.ceil(retry)} s", retry_after=retry
        )

    def release(self, kind: str, seconds: float) -> None:
        """Give the slot back; ``seconds``: how long the request held it."""
        self.times.observe(kind, seconds)
        with self._cond:
            self.running -= 1
            self._cond.notify_all()

    @contextmanager
    def slot(self, kind: str) -> Iterator[float]:
        """Hold a slot for the body of the ``with`` (measured for the estimates); gives the
        seconds the request waited for it."""
        t0 = time.perf_counter()
        self.acquire(kind)
        t1 = time.perf_counter()
        try:
            yield t1 - t0
        finally:
            self.release(kind, time.perf_counter() - t1)


# threads beside the queued and running query requests (documents, admin, the web page)
OTHER_THREADS = 40


def reserve_threads(settings: Settings) -> None:
    """Let the event loop's thread pool hold every admitted request, so that a request waits
    in the admission queue (which sees it and its budget) rather than unseen in AnyIO's
    limiter (40 threads by default) before it; call from the app's lifespan. Threads start
    only as requests arrive."""
    import anyio.to_thread

    limiter = anyio.to_thread.current_default_thread_limiter()
    wanted = settings.max_concurrency + settings.queue_size + OTHER_THREADS
    limiter.total_tokens = max(int(limiter.total_tokens), wanted)
