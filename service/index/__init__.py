"""The inverted BM25 index of Hieber & Riezler 2015, §3, and its on-disk format
(:mod:`service.index.storage`).

Build with :func:`build_docs_index` / :func:`build_pool_index` (``clir build-index``), open with
:meth:`InvertedIndex.load`.
"""

from service.index.bm25 import RsjPolicy, length_norm, rsj, rsj_raw, tf_bm25
from service.index.build import (
    BuildParams,
    BuildResult,
    build_arrays,
    build_docs_index,
    build_in_memory,
    build_pool_index,
    field_terms,
    index_tokens,
    is_current,
    write_index,
)
from service.index.inverted import Hits, InvertedIndex, Postings, top_k
from service.index.storage import FORMAT_VERSION, read_manifest
from service.index.tokenizers import TOKENIZERS, TokenizeFn, get_index_tokenizer, regex_tokenize

__all__ = [
    "FORMAT_VERSION",
    "TOKENIZERS",
    "BuildParams",
    "BuildResult",
    "Hits",
    "InvertedIndex",
    "Postings",
    "RsjPolicy",
    "TokenizeFn",
    "build_arrays",
    "build_docs_index",
    "build_in_memory",
    "build_pool_index",
    "field_terms",
    "get_index_tokenizer",
    "index_tokens",
    "is_current",
    "length_norm",
    "read_manifest",
    "regex_tokenize",
    "rsj",
    "rsj_raw",
    "tf_bm25",
    "top_k",
    "write_index",
]
