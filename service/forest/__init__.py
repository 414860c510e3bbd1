"""Translation forests and the general algorithms over them: the hypergraph
(:mod:`.hypergraph`), semirings (:mod:`.semiring`), inside/outside/Viterbi (:mod:`.inference`),
k-best extraction (:mod:`.kbest`, compiled in :mod:`.kbest_kernel`) and CSR pointer arrays and
row gathering (:mod:`.csr`)."""
