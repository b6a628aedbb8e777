"""The environment variables: one table in torch_tpu/config.py, the docs generated from it, and no module but config
reading TORCH_TPU_* variables."""

from __future__ import annotations

import re
from pathlib import Path

from torch_tpu import config

REPO = Path(__file__).resolve().parents[2]


def test_docs_are_generated_from_the_table() -> None:
    assert (REPO / "docs" / "environment.md").read_text() == config.markdown()


def test_every_variable_load_reads_is_in_the_table() -> None:
    source = (REPO / "torch_tpu" / "config.py").read_text()
    body = source[source.index("def load(") :]
    read = set(re.findall(r'e(?:\.get\(|\[)"([A-Z_]+)"', body))
    assert read, "load() reads no variables: the pattern no longer matches its code"
    assert read == {v.name for v in config.VARIABLES}


def test_no_other_module_reads_torch_tpu_variables() -> None:
    offenders = []
    for path in (REPO / "torch_tpu").rglob("*.py"):
        if path.name == "config.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"environ(\.get)?[\[(]\s*[\"']TORCH_TPU_", line):
                offenders.append(f"{path.relative_to(REPO)}:{number}")
    assert offenders == []


def test_load_reads_values_and_refuses_bad_ones() -> None:
    c = config.load({"TORCH_TPU_EAGER_MODE": "strict", "TPU_VISIBLE_CHIPS": "1,0", "TORCH_TPU_CACHE_DIR": "off"})
    assert (c.eager_mode, c.visible_chips, c.cache_dir) == ("strict", (1, 0), None)
    for bad in ({"TORCH_TPU_EAGER_MODE": "lazy"}, {"TPU_VISIBLE_CHIPS": "a"}, {"TORCH_TPU_PROGRAM_CACHE": "-1"}):
        try:
            config.load(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} was accepted")
