"""OpInfo conformance runner: every entry of PyTorch's op_db on tpu against CPU PyTorch.

    python -m tools.opinfo [--dtypes float32,bfloat16] [--ops 'nn.functional.*'] [--slice ci]
                                     [--samples 6] [--jobs 2] [--timeout 120] [--json PATH] [--markdown PATH]

Each (entry, dtype, direction) is classified pass / fallback (right, but some aten op ran through the CPU
fallback) / mismatch / error / crash / timeout / skipped. Entries run in spawned worker processes (a crash or a
hang costs one entry, the worker is replaced). Needs `expecttest` (op_db imports it).
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import os
import platform
import sys
import time
from typing import Any

import torch

from tools.opinfo.entries import DTYPES, FLOAT_DTYPES, all_entries, entry_dtypes
from tools.opinfo.pool import Pool, Task, progress
from tools.opinfo.report import Results, fallback_notes, markdown, totals
from tools.opinfo.slices import SLICES


def _dtype_list(text: str) -> list[str]:
    if text == "all":
        return list(DTYPES)
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in DTYPES]
    if bad:
        raise SystemExit(f"unknown dtype(s) {bad}; choose from {', '.join(DTYPES)} or 'all'")
    return names


def _matches(name: str, patterns: list[str]) -> bool:
    base = name.split(".")[0] if not name.startswith(("nn.", "special.", "linalg.", "fft.")) else name
    for p in patterns:
        if any(c in p for c in "*?[") and fnmatch.fnmatchcase(name, p):
            return True
        if p in (name, base, name.rsplit(".", 1)[0]):
            return True
    return False


def select(ops: str | None, slice_name: str | None) -> list[str]:
    """Full entry names to run, in op_db order."""
    names = list(all_entries())
    if slice_name is not None:
        if slice_name not in SLICES:
            raise SystemExit(f"unknown slice {slice_name!r}; choose from {', '.join(SLICES)}")
        wanted = set(SLICES[slice_name])
        missing = wanted - set(names)
        if missing:
            raise SystemExit(f"slice {slice_name!r} names entries op_db lacks: {sorted(missing)}")
        names = [n for n in names if n in wanted]
    if ops:
        patterns = [p.strip() for p in ops.split(",") if p.strip()]
        names = [n for n in names if _matches(n, patterns)]
    return names


def plan(names: list[str], dtypes: list[str], bwd_dtypes: list[str], samples: int) -> list[Task]:
    entries = all_entries()
    tasks = []
    for dt in dtypes:  # dtype-major: a partial run has whole dtypes
        for name in names:
            if dt in entry_dtypes(entries[name], [dt]):
                directions = ["forward", "backward"] if dt in bwd_dtypes else ["forward"]
                tasks.append(Task(name, dt, directions, samples))
    return tasks


def run(args: argparse.Namespace) -> dict[str, Any]:
    dtypes = _dtype_list(args.dtypes)
    bwd = [d for d in (_dtype_list(args.bwd_dtypes) if args.bwd_dtypes is not None else FLOAT_DTYPES) if d in dtypes]
    names = select(args.ops, args.slice)
    tasks = plan(names, dtypes, bwd, args.samples)
    results: Results = {n: {} for n in names}
    expected = sum(len(t.directions) for t in tasks)
    done = 0
    start = time.monotonic()

    def on_result(entry: str, dtype: str, direction: str, record: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        results[entry].setdefault(dtype, {})[direction] = record
        if partial is not None:
            partial.write(json.dumps({"entry": entry, "dtype": dtype, "direction": direction, **record}) + "\n")
            partial.flush()
        status = record["status"]
        if status in ("crash", "timeout") or (args.verbose and status not in ("pass", "skipped")):
            progress(f"  {entry} {dtype} {direction}: {status} {record.get('reason', '')}"[:240])
        if done % 100 == 0 or done == expected:
            progress(f"[{done}/{expected}] {time.monotonic() - start:.0f} s")

    entries_run = len({t.entry for t in tasks})
    progress(f"{entries_run} entries, {len(tasks)} entry/dtype tasks, {expected} checks, {args.jobs} workers")
    partial = open(args.json + ".partial.jsonl", "w") if args.json else None  # noqa: SIM115  (closed below)
    try:
        Pool(args.jobs, args.timeout, on_result).run(tasks)
    finally:
        if partial is not None:
            partial.close()
    wall = time.monotonic() - start
    results = {n: {dt: dict(sorted(r.items())) for dt, r in by.items()} for n, by in results.items() if by}
    for by in results.values():  # dtype order as requested
        ordered = {dt: by[dt] for dt in dtypes if dt in by}
        by.clear()
        by.update(ordered)
    command = "python -m tools.opinfo " + " ".join(sys.argv[1:])
    meta = {
        "torch": torch.__version__,
        "samples": args.samples,
        "dtypes": dtypes,
        "backward_dtypes": bwd,
        "jobs": args.jobs,
        "timeout_s": args.timeout,
        "entries": len(results),
        "wall_s": round(wall, 1),
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, XLA-CPU plugin",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command.strip(),
    }
    tot = totals(results)
    tot = {dt: tot[dt] for dt in dtypes if dt in tot}
    for by in tot.values():
        ordered = {d: by[d] for d in ("forward", "backward") if d in by}
        by.clear()
        by.update(ordered)
    return {"meta": meta, "totals": tot, "results": results}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.opinfo", description=__doc__.split("\n")[0])
    p.add_argument("--dtypes", default="all", help=f"comma list of {', '.join(DTYPES)}, or 'all' (default)")
    p.add_argument("--bwd-dtypes", default=None, help="dtypes also checked backward (default: the float ones)")
    p.add_argument(
        "--ops",
        default=None,
        help="comma list of entry names (a name also selects its variants) or glob patterns ('nn.functional.*')",
    )
    p.add_argument("--slice", default=None, help=f"a named subset: {', '.join(SLICES)}")
    p.add_argument("--samples", type=int, default=6, help="first N sample inputs per entry and dtype (default 6)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per entry, dtype and direction")
    p.add_argument("--json", default=None, help="write the per-entry results and totals here")
    p.add_argument("--markdown", default=None, help="write the report (like docs/op_coverage.md) here")
    p.add_argument("--fallback-notes", default=None, help="write every fallback op with all entries it blocks here")
    p.add_argument("--report-only", default=None, metavar="JSON", help="no run: write the reports from a --json file")
    p.add_argument("-v", "--verbose", action="store_true", help="print every non-passing check as it finishes")
    return p.parse_args(argv)


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def load(path: str) -> dict[str, Any]:
    """A --json file, or the .partial.jsonl of an unfinished run (totals recomputed, wall time unknown)."""
    if not path.endswith(".jsonl"):
        with open(path) as f:
            return json.load(f)
    results: Results = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            entry, dtype, direction = rec.pop("entry"), rec.pop("dtype"), rec.pop("direction")
            results.setdefault(entry, {}).setdefault(dtype, {})[direction] = rec
    meta = {"torch": torch.__version__, "samples": "?", "jobs": "?", "entries": len(results), "wall_s": 0.0}
    meta.update(machine="-", date="partial run", command=f"(partial results from {path})")
    return {"meta": meta, "totals": totals(results), "results": results}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data = load(args.report_only) if args.report_only else run(args)
    if args.json and not args.report_only:
        _write(args.json, json.dumps(data, indent=1, sort_keys=False) + "\n")
        os.unlink(args.json + ".partial.jsonl")
    if args.markdown:
        _write(args.markdown, markdown(data))
    if args.fallback_notes:
        _write(args.fallback_notes, fallback_notes(data))
    for dt, by in data["totals"].items():
        for d, c in by.items():
            print(f"{dt:9} {d:8} " + " ".join(f"{k}={v}" for k, v in c.items()))
    print(f"wall {data['meta']['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
