# Two commands: `make demo` (the main job) and `make test` (the whole suite). Each sets itself up idempotently:
# a .venv with the pinned requirements, the editable package, and the CMake build of the native core.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEPS := $(VENV)/.deps-installed
BUILD := build
# The suites whose results depend on the eager mode: run again under debug and strict (the full run is the default,
# fused).
MODE_TESTS := tests/device tests/ops tests/integration tests/modes
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: demo test build lint clean

demo: build
	$(PY) examples/train_char_transformer.py

test: build
	$(VENV)/bin/ruff check .
	$(PY) tools/lint_pure_rules.py
	$(BUILD)/core_test "$$($(PY) -c 'from torch_tpu.runtime import default_plugin_path as p; print(p())')"
	$(PY) -m pytest -q tests
	TORCH_TPU_EAGER_MODE=debug $(PY) -m pytest -q $(MODE_TESTS)
	TORCH_TPU_EAGER_MODE=strict $(PY) -m pytest -q $(MODE_TESTS)

build: $(DEPS) .ccache-checked
	cmake -S . -B $(BUILD) -G Ninja -DPython3_EXECUTABLE=$(abspath $(PY)) > $(BUILD).log 2>&1 || (cat $(BUILD).log; exit 1)
	cmake --build $(BUILD)

lint: $(DEPS)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) tools/lint_pure_rules.py

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch is pinned to the local CPU build and installed in the same pip command as everything that depends on it.
$(DEPS): requirements.txt pyproject.toml | $(PY)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
	touch $@

# ccache makes rebuilds cheap; it is optional, so a failed install only costs speed.
.ccache-checked:
	@command -v ccache >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && apt-get install -y -qq ccache) >/dev/null 2>&1; } || echo "ccache unavailable: building without it"
	@touch $@

clean:
	rm -rf $(BUILD) $(BUILD).log torch_tpu/_C*.so .ccache-checked
