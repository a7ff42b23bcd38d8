# Two commands (see README): `make app` starts the web app, `make test` runs the whole suite.
# Each one creates or refreshes its own virtual environment in .venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: app test docs lint bench fuzz clean

$(BIN)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "pdplan needs Python 3.11+, found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

app: $(BIN)/.installed
	$(BIN)/streamlit run app.py --server.headless true --browser.gatherUsageStats false

test: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

# API reference of `import model` (pdoc, from the docstrings of model.__all__) into build/api/ (not committed).
docs: $(BIN)/.installed
	$(BIN)/python docs/build_api.py build/api

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/run_all.py

# The full fuzzing run (>= 3,000 generated cases; figures in docs/reliability.md).
fuzz: $(BIN)/.installed
	$(BIN)/python benchmarks/fuzz_full.py

clean:
	rm -rf $(VENV) build *.egg-info
