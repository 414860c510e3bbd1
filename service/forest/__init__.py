"""Translation forests and the general algorithms over them: the hypergraph
(:mod:`.hypergraph`), semirings (:mod:`.semiring`), inside/outside/Viterbi (:mod:`.inference`),
k-best extraction (the package :mod:`.kbest`: the lazy search in Python, unique k-best's
reference and its compiled engine) and CSR pointer arrays and row gathering (:mod:`.csr`)."""
