"""Developer tools run as modules, e.g. `python -m torch_tpu.tools.opinfo` (the OpInfo conformance runner)."""
