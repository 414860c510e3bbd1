#!/usr/bin/env bash
# Time one install step of the Makefile on a clone, from no .venv, with a given pip cache
# (bench/README.md, "Install time"; figures in results/install.json). Prints one JSON line.
#   bench/install_time.sh CLONE CACHE_DIR [TARGET]   TARGET: install (default, `make serve`'s
#   step) or .venv/.installed-dev-stamp (`make test`'s). An empty CACHE_DIR is the cold case;
#   run it again with the same CACHE_DIR for the warm one.
set -euo pipefail
clone=$1 cache=$2 target=${3:-install}
cd "$clone"
rm -rf .venv
load=$(cut -d' ' -f1 /proc/loadavg)
start=$(date +%s.%N)
PIP_CACHE_DIR=$cache make "$target" >/dev/null 2>&1
end=$(date +%s.%N)
printf '{"target": "%s", "seconds": %.1f, "venv_mb": %s, "cache_mb": %s, "load": %s}\n' \
  "$target" "$(echo "$end - $start" | bc)" "$(du -sm .venv | cut -f1)" \
  "$(du -sm "$cache" | cut -f1)" "$load"
