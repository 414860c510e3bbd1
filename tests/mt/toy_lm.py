"""The toy trigram LM whose scores the LM tests (test_lm, test_lm_table) work out by hand:
tests/data/toy_trigram.arpa (vocabulary <unk> <s> </s> a b; bigrams "<s> a", "a b", "b </s>";
the one trigram "<s> a b")."""

from __future__ import annotations

from pathlib import Path

TOY_TRIGRAM = Path(__file__).resolve().parent.parent / "data" / "toy_trigram.arpa"
TOY_ARPA = TOY_TRIGRAM.read_text(encoding="utf-8")  # tests derive broken variants from the text
