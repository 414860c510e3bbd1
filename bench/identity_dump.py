"""Identity dump for refactors that must not change a number: the first 50 dev queries of
both pairs, decoded (+LM) and ranked by BOW-FD, DT and PSQ at depth 1000 with the full models
(``models/{de,zh}-en``, ``indexes/docs``), one line per query and method with the document ids
and the scores as ``float.hex``. Run it on two checkouts and ``cmp`` the files::

    PYTHONPATH=<checkout> .venv/bin/python bench/identity_dump.py before.txt   # in <checkout>

``results/identity_refactor.json`` records the last comparison."""

import sys

from service.data import load_queries
from service.mt.bundle import load_bundle
from service.retrieval.runner import decoder_for, load_index, make_scorer, run_queries


def main(path: str) -> None:
    with open(path, "w") as out:
        index = load_index("indexes/docs")
        for lang in ("de", "zh"):
            bundle = load_bundle(f"models/{lang}-en")
            queries = dict(
                list(load_queries(f"../shared/data/clir/lohelp-{lang}/queries.dev.tsv").items())[
                    :50
                ]
            )
            dec = decoder_for(bundle)
            for method in ("bowfd", "dt", "psq"):
                scorer = make_scorer(method, index, bundle)
                run = run_queries(scorer, dec, queries, lang, progress=False)
                for qid in sorted(run.rankings):
                    hits = run.rankings[qid].hits
                    out.write(
                        f"{lang}\t{method}\t{qid}\t"
                        + " ".join(f"{h.doc_id}:{float(h.score).hex()}" for h in hits)
                        + "\n"
                    )
                out.write(f"{lang}\t{method}\tfailed\t{sorted(run.failed)}\n")


if __name__ == "__main__":
    main(sys.argv[1])
