"""Background jobs: the SQLite job store, the task registry and the worker
that runs admin-triggered retraining while the service keeps answering."""

from service.jobs.context import StoreJobContext
from service.jobs.store import JOB_STATES, Job, JobStore

__all__ = ["JOB_STATES", "Job", "JobStore", "StoreJobContext"]
