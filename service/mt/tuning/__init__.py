"""Tuning the decoder's log-linear weights on a dev set (000_b705a4cc6023f712.txt).

:mod:`.bleu` scores hypotheses, :mod:`.optimizers` holds MERT, PRO and the listwise losses
behind one :class:`~.optimizers.Optimizer` interface, :mod:`.loop` runs Algorithm 1 (decode,
optimise, repeat) and :mod:`.dev` turns a model bundle into the loop's k-best decoder.
"""
