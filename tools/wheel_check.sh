#!/usr/bin/env bash
# Builds the wheel (`pip wheel .`, the C++ core through CMake), installs it into a fresh venv with the pinned torch
# and no source tree in reach, and runs tools/wheel_smoke.py there. Run by `make wheel-check` (a CI step).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PY:-.venv/bin/python}
rm -rf dist
# ccache: the build folder differs from make's, so the objects hit only with the folder left out of the hash.
CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=true "$PY" -m pip wheel . -q --disable-pip-version-check --no-build-isolation --no-deps -w dist
WHEEL=$(ls dist/torch_tpu-*.whl)
VENV=$(mktemp -d)/venv
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -c requirements.txt torch xla-cpu-pjrt numpy
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$WHEEL"
cd "$(dirname "$VENV")"  # away from the source tree
"$VENV/bin/python" "$ROOT/tools/wheel_smoke.py"
rm -rf "$(dirname "$VENV")"
