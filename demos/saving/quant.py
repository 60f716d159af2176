"""Dynamic int8 quantization of a trained MLP's Linear layers: size, accuracy and latency, all measured."""

import copy
import logging
import warnings
from dataclasses import dataclass

import torch

from demos.guests import process_slot
from demos.isolated import run_isolated
from demos.saving.models import MLP, accuracy, check_size, synthetic_task, train_mlp
from demos.saving.state import saved_bytes
from demos.shown import Script, entry, script
from demos.timing import median_ms

QMIN, QMAX = -128, 127


def _torchao():
    """Import torchao quietly: on a CPU-only host it logs that its CUDA kernels are absent."""
    logging.getLogger("torchao").setLevel(logging.ERROR)
    import torchao
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    return torchao.__version__, quantize_, Int8DynamicActivationInt8WeightConfig


def _latency_ms(model, x) -> float:
    with torch.no_grad():
        return median_ms(lambda: model(x))


@dataclass(frozen=True)
class QuantResult:
    rows: tuple[dict, ...]  # variant, API, file bytes, held-out accuracy, latency
    size_ratio: float  # float32 file bytes / torchao int8 file bytes
    torchao_version: str
    legacy_warning: str
    code: str


def quantize_two_ways(width: int, depth: int) -> dict:
    """Train, then quantize with torchao (and, for comparison, the deprecated torch.ao API); measure each."""
    version, quantize_, int8_config = _torchao()
    model = train_mlp(width, depth)
    x_test, y_test = synthetic_task(2000, seed=1)
    batch = x_test[:256]
    ao_model = copy.deepcopy(model)
    quantize_(ao_model, int8_config())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        legacy = torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)
    legacy_warning = next((str(w.message).splitlines()[0] for w in caught), "")
    rows = []
    for variant, api, m in (
        ("float32", "eager", model),
        ("int8 dynamic", f"torchao {version}: quantize_(model, Int8DynamicActivationInt8WeightConfig())", ao_model),
        ("int8 dynamic (legacy)", "torch.ao.quantization.quantize_dynamic (deprecated)", legacy),
    ):
        rows.append({"variant": variant, "API": api, "file bytes": saved_bytes(m.state_dict()),
                     "held-out accuracy": accuracy(m, x_test, y_test), "latency ms (batch 256)": _latency_ms(m, batch)})
    return {"rows": tuple(rows), "size_ratio": rows[0]["file bytes"] / rows[1]["file bytes"],
            "torchao_version": version, "legacy_warning": legacy_warning}


@process_slot()  # seconds of CPU: one heavy run at a time on the server (demos.guests)
def quantize_and_measure(width: int = 256, depth: int = 2) -> QuantResult:
    """quantize_two_ways at the visitor's size; its code also holds the scale comparison of scale_schemes."""
    check_size(width, depth)
    return QuantResult(**quantize_two_ways(width, depth), code=quant_code(width, depth))


def quant_code(width: int, depth: int) -> Script:
    """Both measurements of the section as one script: the quantized models, then one layer's int8 scales."""
    return script(MLP, synthetic_task, train_mlp, accuracy, saved_bytes, median_ms, _latency_ms, _torchao,
                  quantize_two_ways, symmetric_params, fake_quantize, compare_scales, imports=IMPORTS,
                  settings={"width": width, "depth": depth, "layer": 0}, run=QUANT_RUN)


@dataclass(frozen=True)
class SchemeResult:
    weights: tuple[float, ...]
    tensor_scale: float
    tensor_zero_point: int
    channel_scales: tuple[float, ...]
    channel_zero_points: tuple[int, ...]
    tensor_error: tuple[float, ...]  # dequantized - original, per weight
    channel_error: tuple[float, ...]
    tensor_mae: float
    channel_mae: float


def symmetric_params(amax: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale and zero point of symmetric int8, as torchao's Int8 weights and quantize_dynamic's qint8 weights use:
    [-amax, amax] spread over the 255 steps of [-128, 127] (scale amax / 127.5), zero point 0."""
    scale = (amax / ((QMAX - QMIN) / 2)).clamp(min=1e-12)
    return scale, torch.zeros_like(scale, dtype=torch.int64)


def fake_quantize(w: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor) -> torch.Tensor:
    """Quantize to int8 and back: round(w * (1 / s)) + z, clamped, then (q - z) * s. Multiplying by the inverse, as
    torch's and torchao's kernels do, rounds the extreme w = -max|w| to -127 (w / s would be the tie -127.5)."""
    q = torch.clamp(torch.round(w * (1.0 / scale)) + zero_point, QMIN, QMAX)
    return (q - zero_point) * scale


def compare_scales(width: int, depth: int, layer: int) -> dict:
    """Per-tensor vs per-channel (per output row) symmetric int8 of one trained weight, with the error of each."""
    model = train_mlp(width, depth)
    w = model.body[2 * layer].weight.detach()
    t_scale, t_zp = symmetric_params(w.abs().max())
    c_scale, c_zp = symmetric_params(w.abs().amax(dim=1))
    t_err = fake_quantize(w, t_scale, t_zp) - w
    c_err = fake_quantize(w, c_scale[:, None], c_zp[:, None]) - w
    return {"weights": tuple(w.flatten().tolist()), "tensor_scale": t_scale.item(), "tensor_zero_point": int(t_zp),
            "channel_scales": tuple(c_scale.tolist()), "channel_zero_points": tuple(c_zp.tolist()),
            "tensor_error": tuple(t_err.flatten().tolist()), "channel_error": tuple(c_err.flatten().tolist()),
            "tensor_mae": t_err.abs().mean().item(), "channel_mae": c_err.abs().mean().item()}


@process_slot()  # seconds of CPU: one heavy run at a time on the server (demos.guests)
def scale_schemes(width: int = 256, depth: int = 2, layer: int = 0) -> SchemeResult:
    """compare_scales at the visitor's size."""
    check_size(width, depth)
    return SchemeResult(**compare_scales(width, depth, layer))


IMPORTS = """import copy
import io
import logging
import statistics
import time
import warnings

import torch
from torch import nn

QMIN, QMAX = -128, 127"""

QUANT_RUN = """for row in quantize_two_ways(width, depth)["rows"]:
    print(row)
s = compare_scales(width, depth, layer)
print(f"per-tensor: scale {s['tensor_scale']:.2e}, zero point {s['tensor_zero_point']}, "
      f"mean |error| {s['tensor_mae']:.3e}")
print(f"per-channel: {len(s['channel_scales'])} scales from {min(s['channel_scales']):.2e} to "
      f"{max(s['channel_scales']):.2e}, mean |error| {s['channel_mae']:.3e}")"""


@entry(16, 1)
def quant_report(width: int = 256, depth: int = 2) -> tuple[QuantResult, SchemeResult]:
    """The Quantization tab's two runs in one go, for a child process (torchao's imports leave with it)."""
    return quantize_and_measure(width, depth), scale_schemes(width, depth)


def quant_in_child(width: int, depth: int) -> tuple[QuantResult, SchemeResult]:
    """quant_report in a child process: torchao's imports (about 120 MB) leave with it."""
    return run_isolated(quant_report, width, depth)
