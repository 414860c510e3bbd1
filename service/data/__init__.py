"""Readers and writers for the data formats of ``../shared/data/README.md``."""

from service.data.formats import (
    doc_size_problem,
    load_qrels,
    load_queries,
    load_run,
    rank_entries,
    read_docs,
    read_parallel,
    read_pool,
    read_qrels,
    read_queries,
    read_run,
    write_docs,
    write_parallel,
    write_qrels,
    write_queries,
    write_run,
)
from service.data.io import ErrorPolicy

__all__ = [
    "ErrorPolicy",
    "doc_size_problem",
    "load_qrels",
    "load_queries",
    "load_run",
    "rank_entries",
    "read_docs",
    "read_parallel",
    "read_pool",
    "read_qrels",
    "read_queries",
    "read_run",
    "write_docs",
    "write_parallel",
    "write_qrels",
    "write_queries",
    "write_run",
]
