# migscope's two entry points: `make demo` (the main job on an embedded default) and
# `make test` (everything CI checks). Both build their own virtual environment first, with
# only what they need: the demo the runtime extras, the tests those plus the test tools.
# `make dist` builds every distribution's wheel and sdist into dist/ (docs/release.md).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DIST ?= dist
# Every distribution of the workspace, installed editable in one pip run so that the root's
# `migscope-core==...` style requirements resolve to these folders (README: layout).
DISTS := core sim kube exporter analyzer applier scheduler
# The root's extras each target installs; a stamp per set, so `make test` after `make demo`
# adds the test tools to the same venv instead of believing it complete.
DEMO_EXTRAS := all
TEST_EXTRAS := all,test
DIST_EXTRAS := dist
comma := ,
stamp = $(VENV)/.installed-$(subst $(comma),+,$(1))
DEMO_STAMP := $(call stamp,$(DEMO_EXTRAS))
TEST_STAMP := $(call stamp,$(TEST_EXTRAS))
DIST_STAMP := $(call stamp,$(DIST_EXTRAS))
STAMP := $(TEST_STAMP)

.PHONY: demo test dist lint typecheck layers unit system-deps clean

demo: $(DEMO_STAMP)
	$(BIN)/migscope demo

test: system-deps $(STAMP) lint typecheck layers unit

# Wheels and sdists of every distribution, named with their versions (scripts/build-dist).
dist: $(DIST_STAMP)
	$(BIN)/python scripts/build-dist --outdir $(DIST)

system-deps:
	@scripts/install-system-deps

# One rule for every extra set: the stem is the set with `+` for `,` (all+test -> all,test).
# pip runs without --quiet: a fresh venv takes minutes and its progress is the only sign.
$(VENV)/.installed-%: pyproject.toml $(DISTS:%=%/pyproject.toml)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
		{ echo "migscope needs Python >= 3.10 ($(PYTHON) is older)" >&2; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check \
		$(DISTS:%=-e ./%) -e '.[$(subst +,$(comma),$*)]'
	@touch $@

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

# One pytest worker per core (pytest-xdist), at most 4: a container's CPU quota does not show
# in nproc, and each worker starts its own servers. Each test file runs whole on one worker, so
# a file's module and session fixtures (a Prometheus, the wheelhouse) start once.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ "$$n" -gt 4 ] && n=4; echo $$n)
unit: $(STAMP)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

clean:
	rm -rf $(VENV) $(DIST) .mypy_cache .ruff_cache .pytest_cache .hypothesis
