"""Offline training of a model bundle (``clir train-model``, ``clir build-demo``).

Word alignment (:mod:`.align`), Hiero rule extraction (:mod:`.extract`), the estimation of the
lexical table (:mod:`.lexical_counts`) and of the rule features (:mod:`.rule_features`), the
n-gram language
model (:mod:`.lm_estimate`), the resumable stages (:mod:`.stages`), the pipeline that writes a
bundle (:mod:`.train`) and the small demo bundle (:mod:`.demo`). Serving reads the bundles these
write and never imports this package (tests/integration/test_import_graph.py).
"""
