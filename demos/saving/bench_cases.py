"""Heavy saving demos timed by `python -m bench` (budget: each export <= 10 s on 2 cores)."""

from demos.saving.export import export_demo
from demos.saving.onnx_export import onnx_roundtrip
from demos.saving.quant import quantize_and_measure

BENCH_CASES = {
    "torch.export with torch.cond": export_demo,
    "ONNX export + onnxruntime (width 64)": lambda: onnx_roundtrip(64, 2),
    "train + torchao int8 + measure (width 256)": lambda: quantize_and_measure(256, 2),
}
