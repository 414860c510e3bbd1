"""Language codes as searchers and clients write them.

A request's ``lang`` names the query's language: ``de``, ``DE``, ``de-DE`` and ``de_AT`` all
mean German (the primary subtag of a BCP 47 tag, in any case). Which languages a running
service answers is a matter of which models it loaded, decided at the edge
(:mod:`service.api.serving`).
"""

from __future__ import annotations

SUPPORTED_LANGUAGES = ("de", "zh")  # the source languages a model bundle can translate from


def normalize_language(lang: str) -> str:
    """The primary language subtag of ``lang``, lower-cased (``" DE-de "`` → ``"de"``);
    anything else (empty, not a code) is returned stripped, to be named in an error."""
    code = lang.strip().replace("_", "-")
    primary = code.split("-", 1)[0]
    if 2 <= len(primary) <= 3 and primary.isascii() and primary.isalpha():
        return primary.lower()
    return code
