"""The OpInfo conformance runner: PyTorch's op_db on tpu against CPU PyTorch (run from the repository root as
`python -m tools.opinfo`; see cli.py). Developer tooling, not part of the installed package."""
