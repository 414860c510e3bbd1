"""Machine translation: the model bundle that serving loads (grammar storage, language model,
lexical table, weights versions) and the SCFG decoders that turn a sentence into a translation
forest with cube pruning. :mod:`.training` builds bundles offline and :mod:`.tuning` tunes their
weights; the forest algorithms (inference, k-best) are in :mod:`service.forest`."""
