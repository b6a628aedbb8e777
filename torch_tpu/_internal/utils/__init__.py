"""TorchTPU's `torch_tpu._internal.utils`: `utils` (assert_close, OpTracer) and `tracer_utils` (formatting)."""
