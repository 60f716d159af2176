"""Dynamic int8 quantization of a trained MLP's Linear layers: size, accuracy and latency, all measured."""

import copy
import inspect
import logging
import warnings
from dataclasses import dataclass

import torch

from demos.guests import process_slot
from demos.saving.models import MLP, accuracy, synthetic_task, train_mlp
from demos.saving.state import saved_bytes
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


@process_slot()  # seconds of CPU: one heavy run at a time on the server (demos.guests)
def quantize_and_measure(width: int = 256, depth: int = 2) -> QuantResult:
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
    ratio = rows[0]["file bytes"] / rows[1]["file bytes"]
    code = QUANT_CODE.format(width=width, depth=depth, model_class=inspect.getsource(MLP))  # the page's own MLP
    return QuantResult(tuple(rows), ratio, version, legacy_warning, code)


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


@process_slot()  # seconds of CPU: one heavy run at a time on the server (demos.guests)
def scale_schemes(width: int = 256, depth: int = 2, layer: int = 0) -> SchemeResult:
    """Per-tensor vs per-channel (per output row) symmetric int8 of one trained weight, with the error of each."""
    model = train_mlp(width, depth)
    w = model.body[2 * layer].weight.detach()
    t_scale, t_zp = symmetric_params(w.abs().max())
    c_scale, c_zp = symmetric_params(w.abs().amax(dim=1))
    t_err = fake_quantize(w, t_scale, t_zp) - w
    c_err = fake_quantize(w, c_scale[:, None], c_zp[:, None]) - w
    return SchemeResult(
        tuple(w.flatten().tolist()), t_scale.item(), int(t_zp), tuple(c_scale.tolist()), tuple(c_zp.tolist()),
        tuple(t_err.flatten().tolist()), tuple(c_err.flatten().tolist()),
        t_err.abs().mean().item(), c_err.abs().mean().item(),
    )


QUANT_CODE = '''import io
import torch
from torch import nn
from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_


{model_class}

def synthetic_task(n, seed):  # Gaussian inputs labelled by a fixed random linear teacher
    teacher = torch.randn(16, 4, generator=torch.Generator().manual_seed(1234))
    x = torch.randn(n, 16, generator=torch.Generator().manual_seed(seed))
    return x, (x @ teacher).argmax(dim=1)


def file_bytes(model):
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.tell()


torch.manual_seed(0)
model = MLP(width={width}, depth={depth})
x, y = synthetic_task(2048, seed=0)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for step in range(150):
    idx = torch.arange(step * 64, step * 64 + 64) % len(x)
    loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
model.eval()

x_test, y_test = synthetic_task(2000, seed=1)


def accuracy(model):
    with torch.no_grad():
        return (model(x_test).argmax(dim=1) == y_test).float().mean().item()


before = file_bytes(model)
print("float32", before, "bytes, held-out accuracy", accuracy(model))
quantize_(model, Int8DynamicActivationInt8WeightConfig())   # int8 weights, activations quantized per call
print("int8", file_bytes(model), "bytes, held-out accuracy", accuracy(model))
w = model.body[0].weight   # torchao's Int8Tensor: int8 data, one scale per output row, symmetric (zero point 0)
print(f"layer 0: {{w.scale.numel()}} scales from {{w.scale.min().item():.2e}} to {{w.scale.max().item():.2e}}, "
      f"zero points {{w.zero_point.unique().tolist()}}")
print(f"{{before / file_bytes(model):.1f}}x smaller")
'''


def quant_report(width: int = 256, depth: int = 2) -> tuple[QuantResult, SchemeResult]:
    """The Quantization tab's two runs in one go, for a child process (torchao's imports leave with it)."""
    return quantize_and_measure(width, depth), scale_schemes(width, depth)
