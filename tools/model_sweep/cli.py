"""Architecture sweep: every transformers model type (or diffusers model class), tiny and random, on tpu against
the CPU.

    python -m tools.model_sweep [--source transformers|diffusers] [--types llama,bert] [--limit N] [--shard I/N]
                                [--heads base,causal_lm] [--timeout 120] [--json PATH] [--markdown PATH] [--rerun]
                                [--report-only]

Each model type runs in its own worker process (tools/model_sweep/worker.py; diffusers_worker.py for diffusers
classes, which the JSON keeps in a section of their own), one type at a time; a head that runs
past --timeout seconds is killed and recorded as a timeout. Results go to the JSON after every type, so a run can
stop at any point and resume: types already in the JSON are skipped unless --rerun. The markdown report
(docs/model_coverage.md) is regenerated from the JSON at the end, or alone with --report-only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import queue
import subprocess
import sys
import threading
import time
from typing import Any

from tools.model_sweep.report import markdown, totals, type_result

DEFAULT_JSON = "docs/model_coverage.json"
DEFAULT_MARKDOWN = "docs/model_coverage.md"
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def all_types() -> list[str]:
    from transformers import CONFIG_MAPPING

    return sorted(CONFIG_MAPPING.keys())


def all_diffusers() -> list[str]:
    from tools.model_sweep.diffusers_pipelines import PIPELINES
    from tools.model_sweep.diffusers_source import model_classes

    return model_classes() + [f"pipeline:{p}" for p in PIPELINES]


def select(types: str | None, shard: str | None, source: str = "transformers") -> list[str]:
    names = all_diffusers() if source == "diffusers" else all_types()
    if types:
        wanted = [t.strip() for t in types.split(",") if t.strip()]
        unknown = [t for t in wanted if t not in names]
        if unknown:
            raise SystemExit(f"unknown model types {unknown}")
        names = wanted
    if shard:
        i, n = (int(x) for x in shard.split("/"))
        if not 0 <= i < n:
            raise SystemExit(f"--shard {shard}: want I/N with 0 <= I < N")
        names = names[i::n]
    return names


def _reader(stream: Any, out: queue.Queue[str | None]) -> None:
    for line in stream:
        out.put(line)
    out.put(None)


def run_type(model_type: str, heads: str | None, timeout: float, source: str = "transformers") -> dict[str, Any]:
    """One model type (a diffusers class or pipeline with source="diffusers") in a worker process:
    {"heads": {head: record}, "seconds": wall}."""
    from tools.model_sweep.heads import heads_for

    t0 = time.monotonic()
    if source == "diffusers":
        plan = [("base", model_type)]
        cmd = [sys.executable, "-m", "tools.model_sweep.diffusers_worker", model_type]
    else:
        plan = heads_for(model_type)
        if heads:
            plan = [(h, c) for h, c in plan if h in heads.split(",")]
        cmd = [sys.executable, "-m", "tools.model_sweep.worker", model_type] + ([heads] if heads else [])
    if not plan:
        return {"heads": {}, "result": "skipped", "reason": "no model class of the sweep's heads", "seconds": 0.0}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_REPO, os.environ.get("PYTHONPATH")])))
    env.setdefault("TORCH_TPU_FALLBACK", "silent")
    proc = subprocess.Popen(cmd, cwd=_REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str | None] = queue.Queue()
    errs: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    threading.Thread(target=_reader, args=(proc.stderr, errs), daemon=True).start()
    records: dict[str, dict[str, Any]] = {}
    current: str | None = None
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            proc.kill()
            proc.wait()
            if current is not None:
                records[current] = {"result": "timeout", "reason": f"over {timeout:.0f} s", "seconds": timeout}
            break
        if line is None:
            break
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue  # a library's print
        if "start" in msg:
            current = msg["start"]
            deadline = time.monotonic() + timeout
        elif "head" in msg:
            records[msg.pop("head")] = msg
            current = None
    rc = proc.wait()
    tail: list[str] = []
    while True:
        try:
            item = errs.get(timeout=1.0)
        except queue.Empty:
            break
        if item is None:
            break
        tail = (tail + [item.rstrip()])[-5:]
    if current is not None and current not in records:  # the worker died in this head
        last = next((t for t in reversed(tail) if t.strip()), "")
        records[current] = {"result": "error", "stage": "crash", "error": f"worker exit {rc}: {last}"[:300]}
    for head, cls in plan:
        records.setdefault(head, {"result": "skipped", "reason": "not reached (an earlier head timed out or crashed)"})
        records[head].setdefault("class", cls)
    return {"heads": {h: records[h] for h, _ in plan}, "seconds": round(time.monotonic() - t0, 2)}


def _save(path: str, data: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    data["totals"] = totals(data["types"])
    data["meta"]["sweep_s"] = round(sum(e.get("seconds", 0.0) for e in data["types"].values()), 1)
    if data.get("diffusers"):
        data["diffusers_totals"] = totals(data["diffusers"])
        data["meta"]["diffusers_sweep_s"] = round(sum(e.get("seconds", 0.0) for e in data["diffusers"].values()), 1)
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(path + ".tmp", path)


def load(path: str) -> dict[str, Any]:
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {"meta": {}, "types": {}}


def _meta() -> dict[str, Any]:
    import torch
    import transformers

    out = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, XLA-CPU plugin",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    try:
        import diffusers

        out["diffusers"] = diffusers.__version__
    except ImportError:
        pass
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.model_sweep", description=(__doc__ or "").split("\n")[0])
    p.add_argument(
        "--source",
        choices=("transformers", "diffusers"),
        default="transformers",
        help="transformers model types (default), or diffusers model classes and the two tiny pipelines",
    )
    p.add_argument("--types", default=None, help="comma list of model types (default: all of CONFIG_MAPPING)")
    p.add_argument("--limit", type=int, default=None, help="run at most N types (after skipping finished ones)")
    p.add_argument("--shard", default=None, help="I/N: every N-th type from the I-th (0-based)")
    p.add_argument("--heads", default=None, help="comma list of heads (base, causal_lm, seq2seq_lm, ...)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per head (default 120)")
    p.add_argument(
        "--json", default=DEFAULT_JSON, help=f"results, read to resume and rewritten (default {DEFAULT_JSON})"
    )
    p.add_argument("--markdown", default=DEFAULT_MARKDOWN, help=f"report (default {DEFAULT_MARKDOWN}); '' for none")
    p.add_argument("--rerun", action="store_true", help="run types already in the JSON again")
    p.add_argument("--report-only", action="store_true", help="no run: write the markdown from the JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data = load(args.json)
    if not args.report_only:
        section = data.setdefault("diffusers", {}) if args.source == "diffusers" else data["types"]
        todo = [t for t in select(args.types, args.shard, args.source) if args.rerun or t not in section]
        if args.limit is not None:
            todo = todo[: args.limit]
        data["meta"].update(_meta())
        print(f"{len(todo)} model types to run", flush=True)
        for i, t in enumerate(todo, 1):
            entry = run_type(t, args.heads, args.timeout, args.source)
            section[t] = entry
            _save(args.json, data)
            heads = " ".join(f"{h}={r['result']}" for h, r in entry["heads"].items())
            print(f"[{i}/{len(todo)}] {t}: {type_result(entry)} ({entry['seconds']:.0f} s) {heads}", flush=True)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(data))
    print(" ".join(f"{k}={v}" for k, v in totals(data["types"]).items()))
    return 0
