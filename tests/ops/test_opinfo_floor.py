"""OpInfo conformance floor: a representative slice of PyTorch's op_db (tools.opinfo.slices.CI) must keep
at least the checked-in number of passes (no CPU fallback) per dtype and direction, and may not crash, hang, or
produce a mismatch that is not already known (tests/ops/opinfo_floor.json).

After an improvement, raise the floor: `python tests/ops/test_opinfo_floor.py --update [results.json]` (rewrites
the JSON from a fresh run of the slice, or from the --json output of one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tools.opinfo.check import (
    Mismatch,
    agrees_with_float64,
    compare,
    same_tie_sums,
    same_up_to_ties,
    to_float64,
    to_tpu,
)
from tools.opinfo.opmath import OpmathMode
from tools.opinfo.report import blockers, markdown, totals

pytest.importorskip("expecttest")

ROOT = Path(__file__).resolve().parents[2]
FLOOR = Path(__file__).with_name("opinfo_floor.json")
CI_ARGS = ["--slice", "ci", "--dtypes", "float32,bfloat16", "--bwd-dtypes", "float32", "--jobs", "2"]


def _run_cli(args: list[str], tmp: Path, env_extra: dict[str, str] | None = None) -> dict[str, Any]:
    out = tmp / "opinfo.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    proc = subprocess.run(
        [sys.executable, "-m", "tools.opinfo", *args, "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


def _checks(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        f"{e} {dt} {d}": r
        for e, by_dt in data["results"].items()
        for dt, by_dir in by_dt.items()
        for d, r in by_dir.items()
    }


def test_compare_flags_wrong_values() -> None:
    expected = torch.tensor([1.0, 2.0, float("nan")])
    compare(expected.to("tpu"), expected, "out")  # equal, nan == nan
    with pytest.raises(Mismatch) as err:
        compare((expected + torch.tensor([0.0, 0.5, 0.0])).to("tpu"), expected, "out")
    assert err.value.max_abs_diff == pytest.approx(0.5)
    with pytest.raises(Mismatch, match="dtype"):
        compare(expected.double().to("tpu"), expected, "out")
    with pytest.raises(Mismatch, match="result on cpu"):
        compare(expected, expected, "out")


def test_float64_reference_accepts_only_answers_closer_to_exact() -> None:
    exact = torch.tensor([1.0 / 3.0, 2.0 / 3.0], dtype=torch.float64)
    cpu = torch.tensor([0.3320, 0.6680], dtype=torch.bfloat16)  # two bf16 ulps off, as a bf16-step kernel might be
    tpu = exact.to(torch.bfloat16).to("tpu")
    assert agrees_with_float64([tpu], [cpu], [exact])
    assert not agrees_with_float64([(tpu.float() + 0.05).bfloat16()], [cpu], [exact])  # wrong is still wrong
    idx = torch.tensor([0, 1])
    assert not agrees_with_float64([tpu, idx.flip(0).to("tpu")], [cpu, idx], [exact, idx])  # indices must equal CPU
    big = torch.tensor([1e6], dtype=torch.float64)  # past float16's range: the rounded answer is inf
    assert agrees_with_float64([torch.tensor([float("inf")], dtype=torch.float16)], [big.half().nan_to_num()], [big])


def test_worst_case_float64_measure_judges_each_result_whole() -> None:
    exact = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64) / 3
    ulp = 2e-5  # above float32's tolerance at these magnitudes (atol 1e-5 + rtol 1.3e-6)
    cpu = (exact + torch.tensor([2 * ulp, 0, 0, 0], dtype=torch.float64)).float()  # CPU's worst: element 0
    tpu = (exact + torch.tensor([0, 0, 0, 2 * ulp], dtype=torch.float64)).float()  # as bad, elsewhere
    assert not agrees_with_float64([tpu.to("tpu")], [cpu], [exact])  # element 3 loses to CPU's
    assert agrees_with_float64([tpu.to("tpu")], [cpu], [exact], worst_case=True)
    worse = (exact + torch.tensor([0, 0, 0, 8 * ulp], dtype=torch.float64)).float()
    assert not agrees_with_float64([worse.to("tpu")], [cpu], [exact], worst_case=True)


def test_opmath_mode_rounds_once_per_op() -> None:
    x = torch.tensor([0.1, 0.7, 1.3, 2.9], dtype=torch.bfloat16)
    y = torch.tensor([3.1, 0.3, 1.7, 0.9], dtype=torch.bfloat16)
    with OpmathMode():
        z = torch.addcmul(x, x, y, value=0.3)  # one op: computed in float32, rounded once
        lse = torch.logsumexp(x, 0)
        s = x.sum(dtype=torch.float32)  # the op's own float32 result stays float32
    assert z.dtype == lse.dtype == torch.bfloat16 and s.dtype == torch.float32
    assert torch.equal(z, torch.addcmul(x.float(), x.float(), y.float(), value=0.3).bfloat16())
    assert torch.equal(lse, torch.logsumexp(x.float(), 0).bfloat16())
    assert s.item() == x.float().sum().item()
    leaf = x.clone().requires_grad_()
    with OpmathMode():
        torch.log_softmax(leaf, 0).backward(torch.ones(4, dtype=torch.bfloat16))  # dtype arguments widen too
    assert leaf.grad is not None and leaf.grad.dtype == torch.bfloat16


def test_tie_order_checks_still_catch_wrong_indices() -> None:
    x = torch.tensor([3.0, 1.0, 1.0, 2.0])
    values, cpu_idx = torch.tensor([1.0, 1.0, 2.0, 3.0]), torch.tensor([1, 2, 3, 0])
    assert same_up_to_ties(x, (values, torch.tensor([2, 1, 3, 0])), (values, cpu_idx))  # other order among ties
    assert not same_up_to_ties(x, (values, torch.tensor([1, 1, 3, 0])), (values, cpu_idx))  # not a permutation
    assert not same_up_to_ties(x, (values, torch.tensor([1, 2, 0, 3])), (values, cpu_idx))  # picks other values
    assert not same_up_to_ties(x, (values.flip(0), cpu_idx), (values, cpu_idx))  # values must equal CPU's
    ints = torch.tensor([7, 9, 9, 2])  # int64 values are values, not indices
    assert same_up_to_ties(ints, (ints.sort().values, torch.tensor([3, 0, 2, 1])), torch.sort(ints), "sort")
    cpu_grad, moved = torch.tensor([0.0, 0.5, 0.0, 0.0]), torch.tensor([0.0, 0.0, 0.5, 0.0])
    assert same_tie_sums(x, moved, cpu_grad)  # the gradient went to the other 1.0
    assert not same_tie_sums(x, torch.tensor([0.0, 0.0, 0.0, 0.5]), cpu_grad)  # ... not to the 2.0


def test_samples_keep_their_storage_layout() -> None:
    base = torch.arange(10.0)
    view = base[2:8:2]
    moved, wide = to_tpu(view), to_float64(view)
    for t in (moved, wide):
        assert (t.stride(), t.storage_offset(), t.untyped_storage().nbytes() // t.element_size()) == ((2,), 2, 10)
    assert torch.equal(moved.as_strided((2,), (1,), 0).cpu(), base[:2])  # elements outside the view came along
    assert wide.dtype == torch.float64 and torch.equal(wide, view.double())


def test_report_counts_and_ranks_blockers() -> None:
    def rec(status: str, *ops: str) -> dict[str, Any]:
        return {"status": status, "reason": "why" if status != "pass" else "", "fallback_ops": dict.fromkeys(ops, 1)}

    results = {
        "a": {"float32": {"forward": rec("fallback", "aten::x", "aten::y"), "backward": rec("pass")}},
        "b": {"float32": {"forward": rec("fallback", "aten::y"), "backward": rec("mismatch")}},
        "c": {"float32": {"forward": rec("crash")}, "bfloat16": {"forward": rec("skipped")}},
        "d": {"bfloat16": {"backward": {**rec("pass"), "cpu_differs": "1 sample(s) differ"}}},
        "e": {"bfloat16": {"backward": rec("xfail")}},
    }
    tot = totals(results)
    assert tot["float32"]["forward"]["fallback"] == 2 and tot["float32"]["forward"]["crash"] == 1
    assert tot["float32"]["backward"]["pass"] == 1 and tot["float32"]["backward"]["mismatch"] == 1
    assert tot["bfloat16"]["forward"]["skipped"] == 1
    assert tot["bfloat16"]["backward"]["pass"] == 1 and tot["bfloat16"]["backward"]["float64"] == 1
    assert tot["bfloat16"]["backward"]["xfail"] == 1 and tot["bfloat16"]["backward"]["mismatch"] == 0
    assert [(op, names) for op, names, _ in blockers(results)] == [("aten::y", ["a", "b"]), ("aten::x", ["a"])]
    meta = {"torch": "t", "samples": 6, "command": "c", "entries": 3, "jobs": 2, "wall_s": 60.0, "machine": "m"}
    text = markdown({"meta": {**meta, "date": "d"}, "totals": tot, "results": results})
    assert "| b | float32 | backward | mismatch | why |" in text and "| c | float32 | forward | crash | why |" in text
    assert "| d | bfloat16 | backward | 1 sample(s) differ |" in text and "| e | bfloat16 | backward | why |" in text


def test_select_and_plan() -> None:
    from tools.opinfo.cli import plan, select

    assert select("max,sum", None) == ["max.reduction_with_dim", "max.reduction_no_dim", "max.binary", "sum"]
    assert "nn.functional.conv2d" in select("nn.functional.conv*", None)
    assert len(select(None, "ci")) == 71
    tasks = plan(["add", "eq"], ["float32", "bool"], ["float32"], 3)
    assert [(t.entry, t.dtype, t.directions) for t in tasks] == [
        ("add", "float32", ["forward", "backward"]),
        ("eq", "float32", ["forward", "backward"]),
        ("add", "bool", ["forward"]),
        ("eq", "bool", ["forward"]),
    ]


def test_pool_isolates_crash_and_hang(tmp_path: Path) -> None:
    """An aborting entry is recorded as crash, a hanging one as timeout; the others still run (workers replaced)."""
    data = _run_cli(
        ["--ops", "abs,neg,exp", "--dtypes", "float32", "--bwd-dtypes", "", "--timeout", "10", "--jobs", "2"],
        tmp_path,
        {"TORCH_TPU_OPINFO_SELFTEST": "crash:neg,hang:exp"},
    )
    status = {e: r["float32"]["forward"]["status"] for e, r in data["results"].items()}
    assert status == {"abs": "pass", "neg": "crash", "exp": "timeout"}, status
    assert "selftest: aborting in neg" in data["results"]["neg"]["float32"]["forward"]["reason"]


def test_ci_slice_meets_floor(tmp_path: Path) -> None:
    floor = json.loads(FLOOR.read_text())
    data = _run_cli(CI_ARGS, tmp_path)
    checks = _checks(data)
    crashed = {k: r["reason"] for k, r in checks.items() if r["status"] in ("crash", "timeout")}
    assert not crashed, f"crashed or hung: {crashed}"
    known = set(floor["known_mismatch"])
    new_mismatch = {k: r["reason"] for k, r in checks.items() if r["status"] == "mismatch" and k not in known}
    assert not new_mismatch, f"new wrong answers: {new_mismatch}"
    lost = sorted(k for k in floor["passing"] if checks.get(k, {}).get("status") != "pass")
    for dtype, by_dir in floor["pass"].items():
        for direction, want in by_dir.items():
            got = data["totals"].get(dtype, {}).get(direction, {}).get("pass", 0)
            assert got >= want, f"{dtype} {direction}: {got} passes < floor {want}; no longer passing: {lost}"


def _update_floor(results: str | None) -> None:
    import tempfile

    if results is not None:
        data = json.loads(Path(results).read_text())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            data = _run_cli(CI_ARGS, Path(tmp))
    checks = _checks(data)
    floor = {
        "about": "tests/ops/test_opinfo_floor.py: passes (no fallback) per dtype/direction on the CI slice",
        "wall_s": data["meta"]["wall_s"],
        "pass": {dt: {d: c["pass"] for d, c in by.items()} for dt, by in data["totals"].items()},
        "known_mismatch": sorted(k for k, r in checks.items() if r["status"] == "mismatch"),
        "passing": sorted(k for k, r in checks.items() if r["status"] == "pass"),
    }
    FLOOR.write_text(json.dumps(floor, indent=1) + "\n")
    print(json.dumps(floor["pass"]), f"wall {floor['wall_s']} s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--update"]:
        _update_floor(sys.argv[2] if len(sys.argv) > 2 else None)
    else:
        print(__doc__)
