"""The one search path under the API, the command line, the warm-up and the benchmarks
(:mod:`service.search.pipeline`)."""
