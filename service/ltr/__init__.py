"""Learning to rank for bag-of-words forced decoding (Hieber & Riezler 2015, §4 "Learning to Decode
for Retrieval").

The weights of BOW-FD — the SMT weights, the IR weight ``v`` (feature ``IR_BM25``) and the
sparse LEX weights — are learned from relevance judgments with the pairwise margin-rescaled
hinge loss and Adadelta (Hieber & Riezler 2015, §4), the listwise losses of Chen et al. 2017, §3–4,
or the ordinal-regression perceptron with uneven margins of Shen & Joshi 2004, §4, distributed by
iterative parameter mixing.

* :mod:`service.ltr.space` — feature names ↔ columns;
* :mod:`service.ltr.forest` — a query sentence's live forest as compact arrays, the best
  derivation of every candidate document and its feature vector;
* :mod:`service.ltr.examples` — training queries (candidates, relevance levels) and the dev set;
* :mod:`service.ltr.objectives` — the losses and update rules, a registry by name;
* :mod:`service.ltr.shard`, :mod:`service.ltr.backends` — one shard of the training data and the
  inline / local-process / Ray backends that run shards;
* :mod:`service.ltr.trainer` — the epoch loop (parameter mixing, dev evaluation, early stopping);
* :mod:`service.ltr.task` — :class:`~service.ltr.task.LtrParams`, the :class:`~service.ltr.task.
  LtrSetup` a run draws its defaults from, and ``train_ltr``, which the job worker (the task
  ``ltr``, :mod:`service.jobs.tasks`) and ``clir train-ltr`` run.
"""
