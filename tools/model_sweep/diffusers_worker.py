"""One diffusers model class (or tiny pipeline) in one process, on tpu against the CPU; JSON lines as worker.py.

    python -m tools.model_sweep.diffusers_worker NAME

NAME is a model class diffusers exports (UNet2DConditionModel, FluxTransformer2DModel, AutoencoderKL, ...) or
``pipeline:DDPMPipeline`` / ``pipeline:DiTPipeline``. A model is built tiny with random weights from seed 0, saved,
loaded on the CPU and with ``device_map="tpu"``; then compared: its forward (every floating tensor), one AdamW
training step regressing its main output onto a fixed random target (loss, every gradient, every parameter after
the step), and the forward compiled with ``torch.compile(backend="tpu")``. A pipeline runs end to end with a CPU
generator and two denoising steps, its output image compared.
"""

from __future__ import annotations

import copy
import sys
import tempfile
import time
import warnings
from typing import Any

import torch

from tools.model_sweep.worker import (
    _break_constant_weights,
    _check_load,
    _emit,
    _error,
    _flatten,
    _step,
    _to,
    compare,
    doubled,
    finish,
    judged_step,
    runnable,
)

HEAD = "base"


def _call(model: Any, inputs: dict[str, Any]) -> Any:
    torch.manual_seed(0)
    return model(**inputs, return_dict=False) if _takes_return_dict(model) else model(**inputs)


def _takes_return_dict(model: Any) -> bool:
    from tools.model_sweep.heads import forward_params

    return "return_dict" in forward_params(model)


def _forward(model: Any, inputs: dict[str, Any], device: str) -> dict[str, torch.Tensor]:
    model.eval()
    with torch.no_grad():
        out = _call(model, _to(inputs, device))
    return {k: v.cpu() for k, v in _flatten(out, "", {}).items()}


def _compiled_forward(model: Any, inputs: dict[str, Any], device: str) -> dict[str, torch.Tensor]:
    torch._dynamo.reset()
    model.eval()
    fn = torch.compile(lambda **kw: _call(model, kw), backend="tpu" if device == "tpu" else "eager")
    with torch.no_grad():
        out = fn(**_to(inputs, device))
    return {k: v.cpu() for k, v in _flatten(out, "", {}).items()}


def _train(model: Any, inputs: dict[str, Any], device: str) -> dict[str, torch.Tensor]:
    from tools.model_sweep.diffusers_source import output_tensor

    torch.manual_seed(0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, eps=1e-5)
    opt.zero_grad()
    pred = output_tensor(_call(model, _to(inputs, device)))
    target = torch.randn(pred.shape, generator=torch.Generator().manual_seed(7)).to(device, pred.dtype)
    loss = torch.nn.functional.mse_loss(pred, target)
    loss.backward()
    res = {"loss": loss.detach().cpu().reshape(-1)}
    res.update({f"grad.{n}": p.grad.cpu() for n, p in model.named_parameters() if p.grad is not None})
    opt.step()
    res.update({f"after.{k}": v.cpu() for k, v in model.state_dict().items() if v.is_floating_point()})
    return res


def _runnable(model: Any, candidates: list[dict[str, Any]]) -> dict[str, Any]:
    return runnable(lambda inputs: _forward(model, inputs, "cpu"), candidates)


def _load_tpu(cls: Any, d: str, rec: dict[str, Any]) -> Any:
    """The model loaded with device_map="tpu", else loaded on the CPU and moved (a note says why)."""
    from tools.model_sweep.diffusers_source import no_dropout

    try:
        tpu = cls.from_pretrained(d, torch_dtype=torch.float32, device_map="tpu")
        rec["loaded_with"] = "device_map"
    except Exception as e:
        rec["notes"].append(f"from_pretrained(device_map='tpu') failed: {_error(e)}")
        tpu = cls.from_pretrained(d, torch_dtype=torch.float32).to("tpu")
        rec["loaded_with"] = "to"
    return no_dropout(tpu)


def run_model(class_name: str) -> dict[str, Any]:
    import diffusers

    import torch_tpu
    from tools.model_sweep.diffusers_source import SKIPPED, build, input_candidates, no_dropout

    t0 = time.monotonic()
    rec: dict[str, Any] = {"head": HEAD, "class": class_name, "steps": {}, "notes": [], "fallback_ops": {}}
    if class_name in SKIPPED:
        rec.update(result="skipped", reason=SKIPPED[class_name])
        return rec
    cls = getattr(diffusers, class_name)
    try:
        torch.manual_seed(0)
        original = build(class_name)
        _break_constant_weights(original)
        inputs = _runnable(original, input_candidates(original))
    except Exception as e:
        rec.update(result="error", stage="build", cpu_fails=True, error=_error(e))
        return rec
    with tempfile.TemporaryDirectory() as d:
        try:
            original.save_pretrained(d)
            cpu = no_dropout(cls.from_pretrained(d, torch_dtype=torch.float32))
        except Exception as e:
            rec.update(result="error", stage="save/load", cpu_fails=True, error=_error(e))
            return rec
        torch_tpu.reset_op_counts()
        try:
            tpu = _load_tpu(cls, d, rec)
        except Exception as e:  # the CPU load worked: tpu's error
            rec.update(result="error", stage="load", cpu_fails=False, error=_error(e))
            return rec
    steps, notes = rec["steps"], rec["notes"]
    steps["load"] = _check_load(original, cpu, tpu, notes)
    # forward and compiled forward first: the training step changes both models' weights
    run64 = lambda: _forward(copy.deepcopy(original).double(), doubled(inputs), "cpu")  # noqa: E731
    fwd: dict[str, dict[str, torch.Tensor]] = {}
    steps["forward"] = judged_step(
        "forward", lambda: _forward(cpu, inputs, "cpu"), lambda: _forward(tpu, inputs, "tpu"), run64, notes, fwd
    )
    steps["compile"] = judged_step(
        "compile",
        lambda: fwd.get("cpu") or _forward(cpu, inputs, "cpu"),
        lambda: _compiled_forward(tpu, inputs, "tpu"),
        run64,
        notes,
    )
    steps["train"] = judged_step(
        "train",
        lambda: _train(cpu, inputs, "cpu"),
        lambda: _train(tpu, inputs, "tpu"),
        lambda: _train(copy.deepcopy(original).double(), doubled(inputs), "cpu"),
        notes,
    )
    return finish(rec, t0)


def run_pipeline(name: str) -> dict[str, Any]:
    import torch_tpu
    from tools.model_sweep.diffusers_pipelines import PIPELINES

    t0 = time.monotonic()
    rec: dict[str, Any] = {"head": HEAD, "class": name, "steps": {}, "notes": [], "fallback_ops": {}}
    make, call = PIPELINES[name]
    try:
        cpu_pipe, tpu_pipe = make(), make()
        torch_tpu.reset_op_counts()
        tpu_pipe.to("tpu")
    except Exception as e:
        rec.update(result="error", stage="build", cpu_fails=True, error=_error(e))
        return rec
    rec["steps"]["pipeline"] = _step(
        "pipeline", lambda: {"images": call(cpu_pipe)}, lambda: {"images": call(tpu_pipe)}, compare
    )
    return finish(rec, t0)


def main(argv: list[str]) -> int:
    import diffusers

    diffusers.utils.logging.set_verbosity_error()
    diffusers.utils.logging.disable_progress_bar()
    warnings.simplefilter("ignore")
    name = argv[0]
    _emit({"plan": [[HEAD, name]]})
    _emit({"start": HEAD})
    try:
        rec = run_pipeline(name.split(":", 1)[1]) if name.startswith("pipeline:") else run_model(name)
    except Exception as e:  # a harness failure still yields a record
        rec = {"head": HEAD, "class": name, "result": "error", "stage": "sweep", "error": _error(e)}
    _emit(rec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
