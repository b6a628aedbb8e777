"""One model type in one process: every selected head on tpu against CPU, one JSON line per head on stdout.

    python -m tools.model_sweep.worker MODEL_TYPE [HEAD,HEAD...]

Lines: {"plan": [[head, class], ...]} first, {"start": head} before each head, then the head's record. A head builds
a tiny model with random weights from seed 0, saves it, loads it on the CPU and with device_map="tpu", and compares
the two: every floating tensor of a forward pass, greedy generation (generative heads), and one AdamW training step
(heads with a loss: the loss, every gradient, every parameter and buffer after the step). The CPU runs each step
first; a step that fails there is the model's own error and does not run on tpu.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import torch

TOL = 1e-4  # max abs error, relative to max(1, the CPU tensor's largest magnitude)
ERROR_LINE = 300


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _error(e: BaseException) -> str:
    if os.environ.get("MODEL_SWEEP_TRACEBACK"):
        traceback.print_exception(e, file=sys.stderr)
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}"[:ERROR_LINE]


def _flatten(obj: Any, prefix: str, out: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Floating tensors of a model output (ModelOutput, dicts, tuples, lists), by dotted path."""
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point() or obj.is_complex():
            out[prefix or "output"] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, (tuple, list)):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}.{i}" if prefix else str(i), out)
    return out


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """Max abs error relative to max(1, max |want|); inf on a shape, dtype or NaN/inf-placement difference."""
    got = got.detach().cpu()
    want = want.detach().cpu()
    if got.shape != want.shape or got.dtype != want.dtype:
        return math.inf
    if got.numel() == 0:
        return 0.0
    g, w = got.double(), want.double()
    if not torch.equal(torch.isfinite(g), torch.isfinite(w)):
        return math.inf
    finite = torch.isfinite(w)
    if not torch.equal(g[~finite].nan_to_num(), w[~finite].nan_to_num()):
        return math.inf
    if not finite.any():
        return 0.0
    diff = (g[finite] - w[finite]).abs().max().item()
    return diff / max(1.0, w[finite].abs().max().item())


def compare(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The worst tensor of two flattened outputs; a missing or extra tensor is a mismatch."""
    if set(got) != set(want):
        only = sorted(set(got) ^ set(want))
        return {"result": "mismatch", "worst": f"tensors present on one side only: {only[:5]}", "error": math.inf}
    worst, err = "", 0.0
    for name, w in want.items():
        e = rel_error(got[name], w)
        if e > err or not worst:
            worst, err = name, e
    return {
        "result": "pass" if err <= TOL else "mismatch",
        "worst": worst,
        "error": err if math.isfinite(err) else "inf",
    }


def _to(d: dict[str, Any], device: str) -> dict[str, Any]:
    """The tensors of `d` moved to `device`; other values (a grid as a list, a frame count) as they are."""
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in d.items()}


def _forward(model: Any, inputs: dict[str, torch.Tensor], device: str) -> dict[str, torch.Tensor]:
    from tools.model_sweep.heads import forward_params

    torch.manual_seed(0)  # one generator state on both sides (ViTMAE's random masking, VITS's noise), as in _train
    model.eval()
    extra = {"use_cache": False} if "use_cache" in forward_params(model) else {}
    with torch.no_grad():
        out = model(**_to(inputs, device), **extra)
    return {k: v.cpu() for k, v in _flatten(out, "", {}).items()}


def _generate(model: Any, inputs: dict[str, torch.Tensor], device: str) -> dict[str, torch.Tensor]:
    from tools.model_sweep.heads import generate_kwargs

    torch.manual_seed(0)
    model.eval()
    prompt = _to({k: v for k, v in inputs.items() if k != "decoder_input_ids"}, device)  # the decoder starts itself
    kwargs = generate_kwargs(model)
    try:
        out = model.generate(**prompt, **kwargs)
    except TypeError as e:  # a generate of its own that passes the pad id itself (BLIP's captioner)
        if "multiple values for keyword argument 'pad_token_id'" not in str(e):
            raise
        kwargs.pop("pad_token_id")
        out = model.generate(**prompt, **kwargs)
    seq = out if isinstance(out, torch.Tensor) else out.sequences
    return {"tokens": seq.cpu()}


def _loss(out: Any) -> torch.Tensor:
    """The step's loss: the model's own, or, for a head that takes labels but computes no loss from them (a
    ModelOutput leaves the None out), the mean of its first floating output, so the backward is still compared."""
    if not isinstance(out, dict):
        return out[0]
    if out.get("loss") is not None:
        return out["loss"]
    first = next((v for v in out.values() if isinstance(v, torch.Tensor) and v.is_floating_point()), None)
    if first is None:
        raise KeyError("loss")
    return first.float().mean()


def _train(model: Any, inputs: dict[str, torch.Tensor], labels: torch.Tensor, device: str) -> dict[str, torch.Tensor]:
    # Both sides start from one generator state: training-time randomness (PhiMoE's sampled routing) then draws the
    # same numbers on tpu as on the CPU, whatever the model's construction consumed from the CPU generator before.
    torch.manual_seed(0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, eps=1e-5)
    opt.zero_grad()
    out = model(**_to(inputs, device), labels=labels.to(device))
    loss = _loss(out)
    loss.backward()
    res = {"loss": loss.detach().cpu().reshape(-1)}
    res.update({f"grad.{n}": p.grad.cpu() for n, p in model.named_parameters() if p.grad is not None})
    opt.step()
    res.update({f"after.{k}": v.cpu() for k, v in model.state_dict().items() if v.is_floating_point()})
    return res


def _float64_arbiter(
    run64: Callable[[], dict[str, torch.Tensor]],
    cpu: dict[str, torch.Tensor],
    tpu: dict[str, torch.Tensor],
    notes: list[str],
    step: str = "train",
    reordered: Callable[[], dict[str, torch.Tensor]] | None = None,
) -> dict[str, Any]:
    """A training step (or forward pass) that mismatches, judged against the same step in float64 on the CPU. Where
    CPU's own float32 result is as far from float64 as tpu's (BatchNorm on 1x1 maps, GroupNorm of a near-constant
    map, AdamW dividing by a gradient near eps), the difference is the model's conditioning, not a wrong answer: the
    step passes, with a note giving both errors. CPU's own spread is also measured, when tpu is still farther, by
    `reordered`: the same float32 step on the CPU summing in another order (channels-last convolutions).
    Elsewhere it stays a mismatch, and the note says how far each side is from float64. The loss and gradients are
    judged; the parameters after AdamW follow from them elementwise (its first step is about lr * sign(gradient), so
    a gradient within rounding of zero moves its parameter by up to 2 * lr either way)."""
    try:
        exact = run64()
    except Exception as e:
        notes.append(f"{step}: no float64 run ({_error(e)})")
        return {}
    worst, worst_excess, tpu_err, cpu_err = _farthest(exact, cpu, tpu)
    how = "CPU"
    if worst_excess > 0 and reordered is not None:
        try:
            other = reordered()
        except Exception:  # noqa: BLE001 - a layout the model refuses: no second estimate
            other = None
        if other is not None:
            worst, worst_excess, tpu_err, cpu_err = _farthest(exact, cpu, tpu, other)
            how = "CPU (either order)"
    notes.append(f"{step} vs float64 at {worst}: {how} {cpu_err:.1e}, tpu {tpu_err:.1e}")
    return {"result": "pass"} if worst_excess <= 0 else {}


def _farthest(
    exact: dict[str, torch.Tensor],
    cpu: dict[str, torch.Tensor],
    tpu: dict[str, torch.Tensor],
    other: dict[str, torch.Tensor] | None = None,
) -> tuple[str, float, float, float]:
    """The judged tensor where tpu is farthest from float64 beyond what the CPU (its farther run, given two) is."""
    worst, worst_excess, tpu_err, cpu_err = "", -math.inf, 0.0, 0.0
    for name, want in exact.items():
        if name not in cpu or name not in tpu or name.startswith("after."):
            continue
        e_tpu = rel_error(tpu[name].double(), want)
        e_cpu = rel_error(cpu[name].double(), want)
        if other is not None and name in other:
            e_cpu = max(e_cpu, rel_error(other[name].double(), want))
        excess = e_tpu - max(TOL, 2 * e_cpu)
        if excess > worst_excess:
            worst, worst_excess, tpu_err, cpu_err = name, excess, e_tpu, e_cpu
    return worst, worst_excess, tpu_err, cpu_err


def _channels_last(x: Any) -> Any:
    """A module, or a dict of inputs, with its 4-D tensors in channels-last layout (other tensors as they are)."""
    if isinstance(x, torch.nn.Module):
        return x.to(memory_format=torch.channels_last)
    return {k: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v for k, v in x.items()}


def doubled(x: Any) -> Any:
    """Floating tensors (alone or the values of a dict) in float64, for the float64 arbiter's run."""
    if isinstance(x, dict):
        return {k: doubled(v) for k, v in x.items()}
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def _tokens_equal(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> dict[str, Any]:
    g, w = got["tokens"], want["tokens"]
    if g.shape == w.shape and torch.equal(g, w):
        return {"result": "pass"}
    return {"result": "mismatch", "worst": "tokens", "tpu": g.tolist(), "cpu": w.tolist()}


def _step(
    name: str,
    cpu: Callable[[], dict[str, torch.Tensor]],
    tpu: Callable[[], dict[str, torch.Tensor]],
    check: Callable[[dict[str, torch.Tensor], dict[str, torch.Tensor]], dict[str, Any]],
) -> dict[str, Any]:
    t0 = time.monotonic()
    try:
        want = cpu()
    except Exception as e:
        return {"result": "error", "cpu_fails": True, "error": _error(e)}
    t1 = time.monotonic()
    try:
        got = tpu()
    except Exception as e:
        return {"result": "error", "cpu_fails": False, "error": _error(e), "cpu_s": round(t1 - t0, 2)}
    out = check(got, want)
    out.update(cpu_s=round(t1 - t0, 2), tpu_s=round(time.monotonic() - t1, 2))
    return out


def judged_step(
    name: str,
    cpu: Callable[[], dict[str, torch.Tensor]],
    tpu: Callable[[], dict[str, torch.Tensor]],
    run64: Callable[[], dict[str, torch.Tensor]],
    notes: list[str],
    kept: dict[str, dict[str, torch.Tensor]] | None = None,
    reordered: Callable[[], dict[str, torch.Tensor]] | None = None,
) -> dict[str, Any]:
    """`_step` compared with `compare`, whose mismatch goes to the float64 arbiter (`run64`: the same step in float64
    on the CPU). Both sides' results are kept in `kept` (under "cpu" and "tpu") for a caller that reuses them."""
    kept = {} if kept is None else kept
    rec = _step(name, lambda: kept.setdefault("cpu", cpu()), lambda: kept.setdefault("tpu", tpu()), compare)
    if rec["result"] == "mismatch" and "cpu" in kept and "tpu" in kept:
        rec.update(_float64_arbiter(run64, kept["cpu"], kept["tpu"], notes, name, reordered))
    return rec


def finish(rec: dict[str, Any], t0: float) -> dict[str, Any]:
    """A head's record completed from its steps: the fallback ops counted, the result and the step it comes from,
    the seconds since `t0`."""
    import torch_tpu

    steps = rec["steps"]
    rec["fallback_ops"] = dict(sorted(torch_tpu.metrics()["fallback_ops"].items()))
    rec["result"], stage = _classify(steps, rec["fallback_ops"])
    if stage is not None:
        rec.update(stage=stage, **{k: v for k, v in steps[stage].items() if k in ("cpu_fails", "error", "worst")})
    rec["seconds"] = round(time.monotonic() - t0, 2)
    return rec


def _classify(steps: dict[str, dict[str, Any]], fallbacks: dict[str, int]) -> tuple[str, str | None]:
    """The head's result and the step it comes from: a tpu error, else a mismatch, else the model's own error (the
    step fails on the CPU too), else fallback or pass."""
    for want, cpu_fails in (("error", False), ("mismatch", None), ("error", True)):
        for name, s in steps.items():
            if s["result"] == want and (cpu_fails is None or bool(s.get("cpu_fails")) == cpu_fails):
                return want, name
    return ("fallback" if fallbacks else "pass"), None


def _check_load(original: Any, cpu: Any, tpu: Any, notes: list[str]) -> dict[str, Any]:
    """Weights loaded with device_map="tpu" must equal the CPU load. Weights a checkpoint lacks are initialised at
    random by both loads (differently): those are copied from the CPU model, with a note."""
    want, orig, got = cpu.state_dict(), original.state_dict(), tpu.state_dict()
    off_tpu = sorted({str(t.device) for t in got.values() if t.device.type != "tpu"})
    if off_tpu:
        notes.append(f"device_map='tpu' left tensors on {off_tpu}")
    reinit, bad = [], []
    for k, w in want.items():
        if k not in got:
            bad.append(k)
        elif not torch.equal(got[k].cpu(), w):
            (reinit if k in orig and not torch.equal(orig[k], w) else bad).append(k)
    if reinit:
        notes.append(f"{len(reinit)} weights not in the checkpoint, initialised at load; copied from CPU: {reinit[:3]}")
        with torch.no_grad():
            for k in reinit:
                got[k].copy_(want[k].to(got[k].device))
    if bad:
        return {"result": "mismatch", "worst": bad[0], "error": "weights differ after load", "count": len(bad)}
    return {"result": "pass"}


def _config_for(cls: Any, cfg: Any) -> Any:
    """The configuration `cls` is built from: `cfg`, or the sub-configuration of the kind the class declares (a
    composite type's causal-LM class takes its text or decoder configuration, as its checkpoints store it)."""
    want = getattr(cls, "config_class", None)
    if not isinstance(want, type) or isinstance(cfg, want):
        return cfg
    return next((v for v in vars(cfg).values() if isinstance(v, want)), cfg)


def _prepare_config(model_type: str, head: str, cls: Any = None) -> Any:
    from tools.model_sweep.tinyconfig import tiny_config

    cfg = _config_for(cls, tiny_config(model_type))
    if head == "masked_lm" and getattr(cfg, "is_decoder", False):
        cfg.is_decoder = False  # a masked LM attends both ways (Reformer's causal_lm head needs the opposite)
    if head == "classification":
        # at least two classes; a class default of more stays (BART's config reloads its default 3 labels, so a
        # head resized to 2 no longer loads from its own checkpoint)
        if int(getattr(cfg, "num_labels", 0) or 0) < 2:
            cfg.num_labels = 2
        for c in {id(cfg): cfg, id(cfg.get_text_config()): cfg.get_text_config()}.values():
            if getattr(c, "pad_token_id", None) is None:
                c.pad_token_id = 0  # sequence classification of a batch finds each row's last non-pad token
    return cfg


def _break_constant_weights(model: Any) -> None:
    """Adds small seeded noise to every floating parameter whose elements are all equal (a router or gate
    initialised to zeros, a norm to ones). Such a model scores its experts or candidates in exact ties, and which of
    tied elements topk/argmax pick is unspecified (CPU and every accelerator differ), so the comparison would test
    tie-breaking, not the model. Both devices load the same perturbed weights."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point() and p.numel() > 1 and bool((p == p.reshape(-1)[0]).all()):
                p.add_(torch.randn(p.shape, generator=g, dtype=torch.float32).to(p.dtype) * 0.02)


# Errors that only say an input has another layout than the forward wants (its rank, a missing argument): when no
# candidate runs, the report names the first error that is not one of these, the one that says what is missing.
_LAYOUT_REJECTIONS = re.compile(
    r"values to unpack|missing \d+ required|Expected \d+D|input must have shape|must be a \d+D|got \d+D"
)


def runnable(run_on_cpu: Callable[[Any], object], candidates: list[Any]) -> Any:
    """The first candidate inputs `run_on_cpu` accepts; when none does, the first whose error is more than a layout
    rejection (or the first), so that the step run with it reports that error."""
    if len(candidates) == 1:
        return candidates[0]
    telling = None
    for inputs in candidates:
        try:
            run_on_cpu(inputs)
            return inputs
        except Exception as e:
            if telling is None and not _LAYOUT_REJECTIONS.search(str(e)):
                telling = inputs
    return candidates[0] if telling is None else telling


def _runnable_inputs(model: Any, candidates: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return runnable(lambda inputs: _forward(model, inputs, "cpu"), candidates)


def run_head(model_type: str, head: str, class_name: str) -> dict[str, Any]:
    import transformers

    import torch_tpu
    from tools.model_sweep.heads import GENERATIVE, input_candidates, make_labels

    t0 = time.monotonic()
    rec: dict[str, Any] = {"head": head, "class": class_name, "steps": {}, "notes": [], "fallback_ops": {}}
    try:
        cls = getattr(transformers, class_name)
    except (AttributeError, ImportError) as e:
        rec.update(result="skipped", reason=f"class not importable here: {_error(e)}")
        return rec
    try:
        if cls.forward is torch.nn.Module.forward:  # Bark's container, VQ image tokenizers (encode/decode only)
            rec.update(result="skipped", reason="no forward(): used through its other methods or its parts")
            return rec
        torch.manual_seed(0)
        original = cls(_prepare_config(model_type, head, cls))
        _break_constant_weights(original)
        inputs = _runnable_inputs(original, input_candidates(original, head))
        labels = make_labels(original, head, inputs)
    except NotImplementedError as e:
        rec.update(result="skipped", reason=f"the sweep makes no inputs for {e}")
        return rec
    except ImportError as e:  # transformers' requires_backends: timm, natten, detectron2, torchaudio
        libraries = sorted(set(re.findall(r"requires the (\S+) library", str(e))))
        if not libraries:
            rec.update(result="error", stage="build", cpu_fails=True, error=_error(e))
        else:
            rec.update(result="skipped", reason=f"needs {' and '.join(libraries)}, not installed here")
        return rec
    except Exception as e:
        rec.update(result="error", stage="build", cpu_fails=True, error=_error(e))
        return rec
    with tempfile.TemporaryDirectory() as d:
        try:
            original.save_pretrained(d)
            cpu = cls.from_pretrained(d, dtype=torch.float32)
        except Exception as e:
            rec.update(result="error", stage="save/load", cpu_fails=True, error=_error(e))
            return rec
        torch_tpu.reset_op_counts()
        try:
            tpu = cls.from_pretrained(d, dtype=torch.float32, device_map="tpu")
            rec["loaded_with"] = "device_map"
        except Exception as e:
            rec["notes"].append(f"from_pretrained(device_map='tpu') failed: {_error(e)}")
            try:
                tpu = cls.from_pretrained(d, dtype=torch.float32).to("tpu")
                rec["loaded_with"] = "to"
            except Exception as e2:
                rec.update(result="error", stage="load", cpu_fails=False, error=_error(e2))
                return rec
    steps = rec["steps"]
    steps["load"] = _check_load(original, cpu, tpu, rec["notes"])
    steps["forward"] = judged_step(
        "forward",
        lambda: _forward(cpu, inputs, "cpu"),
        lambda: _forward(tpu, inputs, "tpu"),
        lambda: _forward(copy.deepcopy(original).double(), doubled(inputs), "cpu"),
        rec["notes"],
    )
    if head in GENERATIVE and getattr(cpu, "can_generate", lambda: False)():
        steps["generate"] = _step(
            "generate", lambda: _generate(cpu, inputs, "cpu"), lambda: _generate(tpu, inputs, "tpu"), _tokens_equal
        )
    if labels is not None:
        steps["train"] = judged_step(
            "train",
            lambda: _train(cpu, inputs, labels, "cpu"),
            lambda: _train(tpu, inputs, labels, "tpu"),
            lambda: _train(copy.deepcopy(original).double(), doubled(inputs), doubled(labels), "cpu"),
            rec["notes"],
            reordered=lambda: _train(_channels_last(copy.deepcopy(original)), _channels_last(inputs), labels, "cpu"),
        )
    return finish(rec, t0)


def main(argv: list[str]) -> int:
    import transformers

    from tools.model_sweep.heads import heads_for

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    warnings.simplefilter("ignore")
    model_type = argv[0]
    plan = heads_for(model_type)
    if len(argv) > 1:
        wanted = set(argv[1].split(","))
        plan = [(h, c) for h, c in plan if h in wanted]
    _emit({"plan": plan})
    for head, class_name in plan:
        _emit({"start": head})
        try:
            rec = run_head(model_type, head, class_name)
        except Exception as e:  # a harness failure still yields a record
            rec = {"head": head, "class": class_name, "result": "error", "stage": "sweep", "error": _error(e)}
        _emit(rec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
