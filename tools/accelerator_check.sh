#!/usr/bin/env bash
# Proves a machine: torch_tpu's device, ops, modes and compile tests, the OpInfo CI slice and the eager-modes
# benchmark on whatever PJRT plugin is found, in one report (see tools/accelerator_check.py). On a GPU host install
# the plugin first: pip install -e ".[cuda12]" (or cuda13); on a TPU host: ".[tpu]".
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
if [ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ]; then PY=.venv/bin/python; fi
exec "$PY" -m tools.accelerator_check "$@"
