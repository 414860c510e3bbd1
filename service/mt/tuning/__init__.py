"""Tuning the decoder's log-linear weights on a dev set (Chen et al. 2017).

:mod:`.bleu` scores hypotheses, :mod:`.optimizers` holds MERT, PRO and the listwise losses
behind one :class:`~.optimizers.Optimizer` interface, :mod:`.loop` runs Algorithm 1 (decode,
optimise, repeat) and :mod:`.dev` turns a model bundle into the loop's k-best decoder.
"""
