"""The user guide (docs/guide/) is executed: every ```python block of a page runs, in order, in one fresh Python
process per page (one namespace, like a notebook), and must finish without an exception. Blocks that must not run
(shell commands, torchrun lines) are fenced as ```bash or ```text. Every python block asserts something, so a page
whose claims stop being true fails here instead of rotting."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "guide"
PAGE_TIMEOUT_S = 240

# The variables that change what the guide's examples show: the guide describes the defaults, as a user starts.
_SCRUBBED = (
    "TORCH_TPU_EAGER_MODE",
    "TORCH_TPU_DEFER_AND_FUSE",
    "TORCH_TPU_LAUNCH_BLOCKING",
    "TORCH_TPU_FALLBACK",
    "TORCH_TPU_DUMP_DIR",
    "TORCH_TPU_COMPILE_REPLAY",
    "TORCH_TPU_PROFILER_OUTPUT_DIR",
)

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)

# Runs the blocks given as a JSON list in argv[1], in one namespace; on an exception prints which block failed.
_RUNNER = r"""
import json, linecache, sys, time, traceback
blocks = json.load(open(sys.argv[1]))
page = sys.argv[2]
namespace = {"__name__": "__main__"}
start = time.perf_counter()
for number, source in enumerate(blocks, 1):
    print(f"--- {page}: block {number} at {time.perf_counter() - start:.1f}s", flush=True)
    name = f"{page}[block {number}]"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)  # tracebacks show the block's lines
    try:
        exec(compile(source, name, "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print(f"GUIDE-FAILED {page}: block {number}", flush=True)
        sys.exit(1)
print(f"GUIDE-OK {page}: {len(blocks)} blocks in {time.perf_counter() - start:.1f}s", flush=True)
"""


def pages() -> list[Path]:
    return sorted(GUIDE.glob("*.md"))


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, source) of every fenced block of a markdown page, in order."""
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(text)]


def python_blocks(text: str) -> list[str]:
    return [source for lang, source in fenced_blocks(text) if lang == "python"]


def _page_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    path = [str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path))
    env["PYTHONUNBUFFERED"] = "1"
    return env


EXECUTED = [p for p in pages() if python_blocks(p.read_text())]


def test_guide_pages_exist() -> None:
    names = {p.name for p in pages()}
    expected = {
        "README.md",
        "getting_started.md",
        "porting.md",
        "execution_modes.md",
        "torch_compile.md",
        "precision.md",
        "compiler_options.md",
        "distributed.md",
        "profiling.md",
        "environment.md",
        "errors.md",
        "jax_kernels.md",
        "export.md",
        "frameworks.md",
        "serving.md",
    }
    assert expected <= names, sorted(expected - names)
    assert {p.name for p in EXECUTED} == expected - {"README.md"}


@pytest.mark.parametrize("page", [p.name for p in pages()])
def test_fences_are_known_and_python_blocks_assert(page: str) -> None:
    text = (GUIDE / page).read_text()
    assert text.count("```") % 2 == 0, f"{page}: unbalanced ``` fences"
    blocks = fenced_blocks(text)
    assert len(blocks) * 2 == text.count("```"), f"{page}: a fence the pattern does not parse"
    for number, (lang, _source) in enumerate(blocks, 1):
        assert lang in ("python", "bash", "text"), f"{page}: block {number} is fenced as {lang!r}"
    for number, source in enumerate(python_blocks(text), 1):
        # `raises(` is errors.md's checking helper (it asserts the exception and its message)
        assert "assert" in source or "raises(" in source, f"{page}: python block {number} checks nothing"


@pytest.mark.parametrize("page", [p.name for p in pages()])
def test_relative_links_resolve(page: str) -> None:
    text = (GUIDE / page).read_text()
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert (GUIDE / target).exists(), f"{page}: link to {target} goes nowhere"


def test_index_lists_every_page() -> None:
    index = (GUIDE / "README.md").read_text()
    for p in pages():
        if p.name != "README.md":
            assert f"]({p.name})" in index, f"docs/guide/README.md does not link {p.name}"


def test_environment_table_is_the_generated_one() -> None:
    """The guide's table of variables is `python -m torch_tpu.config --markdown`'s table, row for row."""
    from torch_tpu import config

    generated = "\n".join(line for line in config.markdown().splitlines() if line.startswith("|"))
    page = "\n".join(line for line in (GUIDE / "environment.md").read_text().splitlines() if line.startswith("|"))
    assert page == generated, "docs/guide/environment.md: paste the table of `python -m torch_tpu.config --markdown`"


@pytest.mark.parametrize("page", [p.name for p in EXECUTED])
def test_page_runs(page: str, tmp_path: Path) -> None:
    blocks = python_blocks((GUIDE / page).read_text())
    if any("from vllm" in b or "import vllm" in b for b in blocks):
        pytest.importorskip("vllm", reason="vLLM is a test extra in its own venv: make test-vllm runs this page")
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    (tmp_path / "runner.py").write_text(_RUNNER)
    work = tmp_path / "work"
    work.mkdir()
    try:
        result = subprocess.run(
            [sys.executable, str(tmp_path / "runner.py"), str(tmp_path / "blocks.json"), page],
            cwd=work,
            env=_page_env(),
            capture_output=True,
            text=True,
            timeout=PAGE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        pytest.fail(f"{page}: timed out after {PAGE_TIMEOUT_S}s; last block started:\n{out[-4000:]}")
    output = result.stdout + result.stderr
    if result.returncode != 0 or f"GUIDE-OK {page}" not in result.stdout:
        failed = re.findall(r"GUIDE-FAILED (.*)", result.stdout)
        where = failed[-1] if failed else f"{page} (exit code {result.returncode})"
        pytest.fail(f"guide page failed at {where}:\n{output[-6000:]}")
    print(result.stdout)  # per-block start times, shown with pytest -rP
