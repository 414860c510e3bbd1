# Every target creates or reuses .venv by itself; re-running a target is a no-op when
# nothing changed. `make serve` and `make test` are the two set-up commands of README.md.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
LOCK   := constraints.txt
REQS   := requirements
# `make serve` installs the service alone, from wheels (no compiler); the extras `train`
# (eflomal, compiled) and `ray` come with the targets that need them (`make test`: `dev`).
STAMP       := $(VENV)/.installed-stamp
TRAIN_STAMP := $(VENV)/.installed-train-stamp
DEV_STAMP   := $(VENV)/.installed-dev-stamp
# Each environment installs from its hashed lock $(REQS)/<env>.txt (the pins of $(LOCK), every
# file's sha256): pip refuses a download whose hash differs. Packages built from source get their
# build tools pinned by $(LOCK); the project itself goes in last, editable and without deps,
# and `pip check` confirms that the lock held everything it needs.
PIP_LOCKED := $(BIN)/python -m pip install --quiet --require-hashes --build-constraint $(LOCK) -r
PIP_SELF   := $(BIN)/python -m pip install --quiet --no-deps --build-constraint $(LOCK) -e .
DATA   ?= ../shared/data
HOST   ?= 127.0.0.1
PORT   ?= 8000
WORKERS ?=

.PHONY: install test check lint typecheck pytest serve models demo index bench clean browser compose lock

$(STAMP): pyproject.toml $(REQS)/tools.txt $(REQS)/serve.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# first the locked pip itself: a new venv's pip may predate --build-constraint
	$(BIN)/python -m pip install --quiet --require-hashes -r $(REQS)/tools.txt
	$(PIP_LOCKED) $(REQS)/serve.txt
	@# kenlm now comes from the ufal.kenlm wheel; both install the module `kenlm`
	@$(BIN)/python -m pip uninstall --quiet --yes kenlm 2>/dev/null || true
	$(PIP_SELF)
	$(BIN)/python -m pip check
	@touch $(STAMP)

$(TRAIN_STAMP): $(STAMP) $(REQS)/train.txt
	$(PIP_LOCKED) $(REQS)/train.txt
	@touch $@

$(DEV_STAMP): $(STAMP) $(REQS)/dev.txt
	$(PIP_LOCKED) $(REQS)/dev.txt
	$(BIN)/python -m pip check
	@touch $@ $(TRAIN_STAMP)

install: $(STAMP)

# Re-pin $(LOCK) after a change of pyproject.toml's dependencies or constraints.in (keeps the
# other pins; `make lock LOCK_ARGS=--upgrade` moves every pin to the newest release), then
# compile each environment's hashed lock from those pins: tools (pip, setuptools, wheel), serve
# (the service alone), train (+ eflomal), dev (`make test`: train, ray and the test tools) and
# image (docker/Dockerfile).
LOCK_ARGS ?=
UV_COMPILE = $(BIN)/uv pip compile --universal --python-version 3.11 --native-tls \
	--custom-compile-command 'make lock' --quiet
lock: $(STAMP)
	$(BIN)/python -m pip install --quiet --constraint $(LOCK) uv
	$(UV_COMPILE) pyproject.toml constraints.in --all-extras $(LOCK_ARGS) -o $(LOCK)
	$(UV_COMPILE) -c $(LOCK) --generate-hashes $(REQS)/tools.in -o $(REQS)/tools.txt
	$(UV_COMPILE) -c $(LOCK) --generate-hashes pyproject.toml $(REQS)/tools.in -o $(REQS)/serve.txt
	$(UV_COMPILE) -c $(LOCK) --generate-hashes pyproject.toml $(REQS)/tools.in --extra train \
		-o $(REQS)/train.txt
	$(UV_COMPILE) -c $(LOCK) --generate-hashes pyproject.toml $(REQS)/tools.in --extra dev \
		-o $(REQS)/dev.txt
	$(UV_COMPILE) -c $(LOCK) --generate-hashes pyproject.toml $(REQS)/tools.in --extra train \
		--extra ray $(REQS)/image.in -o $(REQS)/image.txt

lint: $(DEV_STAMP)
	$(BIN)/ruff check service tests bench
	$(BIN)/ruff format --check service tests bench

typecheck: $(DEV_STAMP)
	$(BIN)/mypy service

# both cores: pytest-xdist workers, a module's tests (and every Ray test) kept in one worker
# (tests/conftest.py); PYTEST_WORKERS=0 runs them in this process
PYTEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(PYTEST_WORKERS)),-p no:xdist,-n $(PYTEST_WORKERS) --dist loadgroup)

pytest: $(DEV_STAMP) browser compose
	$(BIN)/pytest -W error --strict-markers --durations=15 $(XDIST)

# the inner loop: lint and the fast tier, every test outside the integration/ folders (no process,
# Ray, browser, shared data or slow run: tests/README.md)
check: $(DEV_STAMP)
	$(BIN)/ruff check service tests bench
	$(BIN)/pytest -W error --strict-markers -q --ignore-glob='*/integration/*' $(XDIST)

test: lint typecheck pytest

# Debian's Chromium and ChromeDriver for the web page's browser test (tests/api/test_page.py,
# marker `browser`); installed once, as root, when missing. Never a downloaded browser build.
browser:
	@test -x /usr/bin/chromium -a -x /usr/bin/chromedriver || { \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }

# Debian's docker-compose for tests/test_containers.py (`docker-compose config` validates
# docker-compose.yml; no Docker engine is needed). Installed once, as root, when missing.
compose:
	@command -v docker-compose >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose; }

serve: $(STAMP)
	$(BIN)/clir serve --host $(HOST) --port $(PORT) $(if $(WORKERS),--workers $(WORKERS))

# Train both bundles (resumable), then tune each with top-rank enhanced ListMLE (Chen et al.
# 2017; the default) on dev paragraph pairs and activate the tuned weights if held-out BLEU
# improves; a bundle that already has a tuned version is not tuned again.
TUNE_ARGS ?= --method listmle-te --iterations 10 --patience 3 --dev-size 300 --heldout-size 200

models: $(TRAIN_STAMP)
	$(BIN)/clir train-model --parallel $(DATA)/parallel/de-en.tsv.gz --lm-text $(DATA)/lm/en.txt.gz \
		--src de --tgt en --out models/de-en
	$(BIN)/clir train-model --parallel $(DATA)/parallel/zh-en.tsv.gz --lm-text $(DATA)/lm/en.txt.gz \
		--src zh --tgt en --out models/zh-en
	for pair in de-en zh-en; do \
		$(BIN)/clir weights --model models/$$pair | grep -q ' tune-' || \
		$(BIN)/clir tune --model models/$$pair --dev $(DATA)/tr/$$pair $(TUNE_ARGS) --activate \
		|| exit 1; \
	done

demo: $(TRAIN_STAMP)
	$(BIN)/clir build-demo --data $(DATA) --out models/demo-de-en

# The documents' dense vectors take most of it (about an hour on 2 cores: ~70 k passages); an
# interrupted run resumes where it stopped, and the index serves lexically until they are done.
index: $(STAMP)
	$(BIN)/clir build-index --docs $(DATA)/clir/docs.jsonl.gz --out indexes/docs
	$(BIN)/clir build-index --pool $(DATA)/tr/pool.en.tsv.gz --out indexes/pool

# The cheap benchmarks (demo bundle, synthetic data, samples; results under bench/results/quick/,
# each stamped with the revision and the machine). One benchmark: `python -m bench NAME`;
# all of them, cheap and full: `python -m bench --list`.
bench: $(DEV_STAMP)
	$(BIN)/python -m bench --cheap

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
