"""ONNX with onnxruntime and int8 quantization: measured, and checked against eager torch."""

import copy

import pytest
import torch

from demos.saving.onnx_export import onnx_roundtrip
from demos.saving.quant import _torchao, fake_quantize, quantize_and_measure, scale_schemes, symmetric_params


def test_onnx_matches_eager_with_a_dynamic_batch():
    r = onnx_roundtrip(32, 1)
    assert [c["batch"] for c in r.checks] == [1, 8]
    assert [c["output shape"] for c in r.checks] == ["(1, 4)", "(8, 4)"]
    assert all(c["max |onnxruntime - eager|"] <= 1e-5 for c in r.checks)
    assert "batch" in r.input_shape
    assert [n["op_type"] for n in r.nodes].count("Gemm") == 2
    assert r.ort_ms > 0 and r.eager_ms > 0 and r.file_bytes > 0


def test_dynamic_int8_is_at_least_3x_smaller_and_keeps_accuracy():
    q = quantize_and_measure(256, 2)
    fp32, int8, legacy = q.rows
    assert q.size_ratio >= 3.0
    assert fp32["held-out accuracy"] > 0.8, "the model trained"
    assert abs(int8["held-out accuracy"] - fp32["held-out accuracy"]) < 0.03
    assert legacy["file bytes"] * 3 <= fp32["file bytes"]
    assert "deprecated" in q.legacy_warning


@pytest.mark.parametrize("seed", [0, 1])
def test_fake_quantize_equals_torch(seed):
    w = torch.randn(16, 32, generator=torch.Generator().manual_seed(seed)) * torch.linspace(0.1, 3, 16)[:, None]
    scale, zp = symmetric_params(w.abs().max())
    ours = fake_quantize(w, scale, zp)
    theirs = torch.fake_quantize_per_tensor_affine(w, scale.item(), int(zp), -128, 127)
    assert torch.allclose(ours, theirs, atol=1e-6)
    c_scale, c_zp = symmetric_params(w.abs().amax(dim=1))
    ours_c = fake_quantize(w, c_scale[:, None], c_zp[:, None])
    theirs_c = torch.fake_quantize_per_channel_affine(w, c_scale, c_zp.to(torch.int32), 0, -128, 127)
    assert torch.allclose(ours_c, theirs_c, atol=1e-6)


def test_scales_are_the_ones_both_quantization_apis_choose():
    """Per-tensor: quantize_dynamic's qint8 weight; per-channel: torchao's Int8 weight. Both symmetric."""
    s = scale_schemes(16, 1)
    w = torch.tensor(s.weights).reshape(len(s.channel_scales), -1)
    linear = torch.nn.Linear(w.shape[1], w.shape[0])
    linear.weight.data = w.clone()
    legacy = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(linear), {torch.nn.Linear}, torch.qint8)
    assert legacy[0].weight().q_zero_point() == s.tensor_zero_point == 0
    assert legacy[0].weight().q_scale() == pytest.approx(s.tensor_scale, rel=1e-6)
    _, quantize_, config = _torchao()
    ao = torch.nn.Sequential(copy.deepcopy(linear))
    quantize_(ao, config())
    assert torch.allclose(ao[0].weight.scale.flatten(), torch.tensor(s.channel_scales), rtol=1e-6)
    assert set(ao[0].weight.zero_point.flatten().tolist()) == set(s.channel_zero_points) == {0}
    drawn = torch.tensor(s.channel_error).reshape(w.shape) + w  # the figure's per-channel dequantized weights
    assert torch.allclose(ao[0].weight.dequantize(), drawn, atol=1e-6)


def test_per_channel_error_is_below_per_tensor():
    s = scale_schemes(64, 1)
    assert s.channel_mae < s.tensor_mae
    assert len(s.channel_scales) == 64 and max(s.channel_scales) <= s.tensor_scale + 1e-12
