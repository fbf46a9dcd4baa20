# migscope's two entry points: `make demo` (the main job on an embedded default) and
# `make test` (everything CI checks). Both build their own virtual environment first.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Every distribution of the workspace, installed editable in one pip run so that the root's
# `migscope-core==...` style requirements resolve to these folders (README: layout).
DISTS := core sim kube exporter analyzer applier scheduler

.PHONY: demo test lint typecheck layers unit system-deps clean

demo: $(STAMP)
	$(BIN)/migscope demo

test: system-deps $(STAMP) lint typecheck layers unit

system-deps:
	@scripts/install-system-deps

$(STAMP): pyproject.toml $(DISTS:%=%/pyproject.toml)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
		{ echo "migscope needs Python >= 3.10 ($(PYTHON) is older)" >&2; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
		$(DISTS:%=-e ./%) -e '.[all,test]'
	@touch $@

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
