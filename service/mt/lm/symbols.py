"""The n-gram model's special words and its one log conversion.

ARPA files and KenLM (Heafield 2011, "KenLM: Faster and Smaller Language Model Queries") mark a
sentence start ``<s>``, a sentence end ``</s>`` and the unknown word ``<unk>``, and store
probabilities as log10. The decoder's features are natural logs, so a score crosses from one to
the other in one place, by :data:`LN10` (:meth:`service.mt.lm.LanguageModel.score`; the LM
table's Python accessors, which the tests compare with it, use the same constant).
"""

from __future__ import annotations

import math

BOS = "<s>"
EOS = "</s>"
UNK = "<unk>"

LN10 = math.log(10.0)  # log10 -> natural log: ln(p) = log10(p) * LN10
