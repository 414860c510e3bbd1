"""The foundation every layer of the service stands on: one module each, none importing
another (docs/layout.md).

* :mod:`~service.core.settings` — the service's settings, read only at the edges (the API, the
  command line, the job worker) and passed down as arguments;
* :mod:`~service.core.logs` — structured logs; :mod:`~service.core.progress` — how a long task
  reports progress and learns it should stop; :mod:`~service.core.processes` — processes of
  this machine and the open-file limit;
* :mod:`~service.core.jit` — the numba convention of every kernel; :mod:`~service.core.csr` —
  compressed sparse rows; :mod:`~service.core.arraydir` — directories of ``.npy`` arrays
  written whole or not at all;
* :mod:`~service.core.learning` — AdaDelta and the listwise losses that tuning and learning to
  rank share; :mod:`~service.core.extras` — imports of the optional extras' packages.
"""
