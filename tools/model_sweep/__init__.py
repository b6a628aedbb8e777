"""Architecture sweep over transformers model types, tpu against CPU (run as `python -m tools.model_sweep`; see
cli.py). Developer tooling, not part of the installed package."""
