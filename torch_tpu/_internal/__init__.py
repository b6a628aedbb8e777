"""The module paths TorchTPU (Google's torch-tpu wheel) exposes under `torch_tpu._internal`, so that scripts written
for it import the same names here: `execution_mode`, `sync`. Each module says what it maps to."""
