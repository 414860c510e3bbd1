"""Tuning the decoder's log-linear weights on a dev set (Chen et al. 2017).

:mod:`.bleu` scores hypotheses, :mod:`.optimizers` holds MERT, PRO and the listwise optimisers
behind one :class:`~.optimizers.Optimizer` interface (their losses and AdaDelta are in
:mod:`service.core.learning`, shared with learning to rank), :mod:`.loop` runs Algorithm 1 (decode,
optimise, repeat) and :mod:`.dev` turns a model bundle into the loop's k-best decoder.
"""
