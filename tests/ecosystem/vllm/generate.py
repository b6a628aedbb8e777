"""Runs vLLM's offline `LLM.generate` on a model directory and prints the tokens as one JSON line.

Run in a process of its own, once on vLLM's CPU platform (`VLLM_PLUGINS=""`) and once on tpu (torch_tpu's platform
plugin), so that tests/ecosystem/test_vllm.py can compare the two token for token.

    python -m tests.ecosystem.vllm.generate MODEL_DIR [--no-prefix-caching] [--compile] [--max-tokens N]
        [--tensor-parallel-size N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

# Mixed lengths: one prompt shorter than a block, two longer than one KV block (block_size 32), and three that share
# a long prefix (prefix caching reuses its blocks).
_WORDS = "the river garden window kettle lantern harbour meadow engine signal forest market bridge letter".split()
SHARED = " ".join(_WORDS * 4)
PROMPTS = [
    "the morning train",
    " ".join(_WORDS[:9]),
    " ".join(_WORDS * 3),
    SHARED + " summer",
    SHARED + " winter island",
    SHARED + " copper water field",
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--no-prefix-caching", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    args = parser.parse_args()

    from vllm import LLM, SamplingParams
    from vllm.platforms import current_platform

    llm = LLM(
        model=args.model,
        dtype="float32",
        max_model_len=256,
        block_size=32,
        kv_cache_memory_bytes=8 << 20,
        enable_prefix_caching=not args.no_prefix_caching,
        enforce_eager=not args.compile,
        seed=0,
        tensor_parallel_size=args.tensor_parallel_size,
        # Workers of tensor parallelism are processes of their own (spawned: see torch_tpu.vllm.platform).
        distributed_executor_backend="mp" if args.tensor_parallel_size > 1 else None,
    )
    greedy = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, ignore_eos=True)
    seeded = [
        SamplingParams(temperature=0.9, top_p=0.95, seed=100 + i, max_tokens=12, ignore_eos=True) for i in range(3)
    ]
    result = {
        "platform": type(current_platform).__name__,
        "greedy": [o.outputs[0].token_ids for o in llm.generate(PROMPTS, greedy, use_tqdm=False)],
        # The prefix is cached now: the same prompts again must give the same tokens.
        "greedy_again": [o.outputs[0].token_ids for o in llm.generate(PROMPTS, greedy, use_tqdm=False)],
        "seeded": [o.outputs[0].token_ids for o in llm.generate(PROMPTS[:3], seeded, use_tqdm=False)],
        "seeded_again": [o.outputs[0].token_ids for o in llm.generate(PROMPTS[:3], seeded, use_tqdm=False)],
    }
    result = {k: [list(t) for t in v] if isinstance(v, list) else v for k, v in result.items()}
    if current_platform.device_type == "tpu":
        import torch_tpu

        metrics = torch_tpu.metrics()
        result["counters"] = {k: metrics[k] for k in ("replayed_calls", "captured_graphs", "executions", "compiles")}
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
