"""Oracle tests for the storage tracker and the training-step timeline: bytes checked against torch itself."""

import re

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import DefaultDeviceType

from demos.errors import InputError
from demos.memory import training
from demos.memory.allocator import fmt_bytes, round_size
from demos.memory.autocast import SimulatedAutocast
from demos.memory.models import MODELS, build_model
from demos.memory.tracker import CATEGORIES
from demos.memory.training import RunSpec, largest_fitting, logging_trap, simulate, validate
from tests.conftest import ROOT

MLP = "MLP (4 x 2048)"
CNN = "Small CNN (CIFAR 32x32)"
TINY = "Transformer tiny (2 x 128)"


def param_bytes_by_torch(model_name: str, seq_len: int = 32) -> int:
    """Allocator-rounded parameter bytes of the same model built with real CPU tensors."""
    model = build_model(MODELS[model_name], seq_len)
    return sum(round_size(p.numel() * p.element_size()) for p in model.parameters())


@pytest.mark.parametrize("spec", [
    RunSpec(MLP, 16, 32, "fp32", "Adam", False, True, 2),
    RunSpec(CNN, 8, 32, "bf16 autocast", "SGD momentum", True, False, 2),
    RunSpec(TINY, 2, 64, "fp16 autocast", "Adam", True, True, 3),
    RunSpec(TINY, 2, 64, "bf16 weights", "SGD", False, False, 1),
], ids=["mlp-adam", "cnn-ckpt-autocast", "tiny-ckpt-fp16", "tiny-bf16"])
def test_categories_sum_to_total_at_every_event(spec):
    t = simulate(spec)
    for i, total in enumerate(t.total):
        assert sum(t.by_category[c][i] for c in CATEGORIES) == total
        assert t.allocated[i] >= total  # the allocator hands out whole blocks
        assert t.reserved[i] >= t.allocated[i]
    assert t.total[-1] >= 0 and all(v >= 0 for series in t.by_category.values() for v in series)


@pytest.mark.parametrize("model", [MLP, CNN, TINY])
def test_parameter_bytes_match_torch(model):
    t = simulate(RunSpec(model, 2, 32, "fp32", "SGD", False, True, 1))
    assert t.param_bytes == param_bytes_by_torch(model)
    assert t.n_params == sum(p.numel() for p in build_model(MODELS[model], 32).parameters())


@pytest.mark.parametrize("model", [MLP, CNN, TINY])
def test_adam_state_is_twice_the_parameters_after_the_first_step(model):
    t = simulate(RunSpec(model, 2, 32, "fp32", "Adam", False, True, 1))
    end_of_step = max(i for i, op in enumerate(t.op_index) if op <= t.phases[2][2])
    assert t.by_category["optimizer_state"][end_of_step] == 2 * param_bytes_by_torch(model)
    first, last = t.phases[2][1], t.phases[2][2]
    assert first <= t.first_optimizer_state_op <= last, "the state appears inside the first step()"


@pytest.mark.parametrize("model", [MLP, CNN, TINY])
def test_gradient_bytes_equal_parameter_bytes(model):
    t = simulate(RunSpec(model, 2, 32, "fp32", "SGD", False, False, 2))
    assert t.category_peaks["gradient"] == t.param_bytes == param_bytes_by_torch(model)


def test_gradients_live_until_zeroed():
    kept = simulate(RunSpec(MLP, 4, 32, "fp32", "SGD", False, False, 2))
    freed = simulate(RunSpec(MLP, 4, 32, "fp32", "SGD", False, True, 2))
    start_of_forward_2 = lambda t: min(i for i, op in enumerate(t.op_index) if op >= t.phases[4][1])  # noqa: E731
    assert kept.by_category["gradient"][start_of_forward_2(kept)] == kept.param_bytes
    assert freed.by_category["gradient"][start_of_forward_2(freed)] == 0


def test_mlp_activation_peak_is_linear_in_batch_with_the_hand_computed_slope():
    model = build_model(MODELS[MLP], 1)
    widths = [m.out_features for m in model.modules() if isinstance(m, torch.nn.Linear)]
    # saved per sample: each ReLU's output (fp32) and log_softmax's output over the classes
    per_sample = 4 * sum(widths)
    peaks = {b: simulate(RunSpec(MLP, b, 1, "fp32", "SGD", False, True, 1)).category_peaks["activation"]
             for b in (128, 256, 384)}
    assert peaks[256] - peaks[128] == 128 * per_sample
    assert peaks[384] - peaks[256] == 128 * per_sample


@pytest.mark.parametrize("model", [CNN, TINY])
def test_checkpointing_lowers_the_activation_peak(model):
    plain = simulate(RunSpec(model, 8, 64, "fp32", "SGD", False, True, 1))
    ckpt = simulate(RunSpec(model, 8, 64, "fp32", "SGD", True, True, 1))
    assert ckpt.category_peaks["activation"] < plain.category_peaks["activation"]


def test_autocast_lowers_the_activation_peak():
    fp32 = simulate(RunSpec(TINY, 8, 64, "fp32", "SGD", False, True, 1))
    bf16 = simulate(RunSpec(TINY, 8, 64, "bf16 autocast", "SGD", False, True, 1))
    assert bf16.category_peaks["activation"] < fp32.category_peaks["activation"]


@pytest.mark.parametrize("spec", [
    RunSpec(MLP, 8, 1, "fp32", "SGD momentum", False, True, 2),
    RunSpec(MLP, 8, 1, "fp32", "SGD", True, False, 2),
    RunSpec(CNN, 4, 1, "fp32", "SGD momentum", True, True, 2),
    RunSpec(CNN, 4, 1, "bf16 autocast", "SGD", False, True, 1),
], ids=["mlp", "mlp-ckpt", "cnn-ckpt", "cnn-autocast"])
def test_meta_and_real_cpu_tensors_give_identical_byte_counts(spec, monkeypatch):
    # SGD only: Adam's `step` counters live on the CPU, which is the tracked device in the CPU run. The cuDNN
    # workspace estimate is left out of the meta run: the CPU run has no cuDNN. Checkpointing treats a region whose
    # tensors are all on the CPU as one of the default device type, the accelerator where there is one: pin it to
    # the CPU so that the CPU run is the same run on a GPU machine.
    monkeypatch.setattr(DefaultDeviceType, "_default_device_type", "cpu")
    meta, cpu = simulate(spec, "meta", conv_workspace_estimate=False), simulate(spec, "cpu")
    assert meta.total == cpu.total
    assert meta.by_category == cpu.by_category
    assert meta.allocated == cpu.allocated and meta.reserved == cpu.reserved


def cuda_cross_entropy_probe() -> tuple[str, str, str]:
    """What CUDA autocast did to cross_entropy on an H200 (assets/gpu/probe_ws.txt, probe x): the op feeding
    nll_loss, the loss dtype and the dtype of the log_softmax that autograd saved."""
    line = next(x for x in (ROOT / "assets/gpu/probe_ws.txt").read_text().splitlines() if x.startswith("cuda fwd"))
    node, loss, saved = re.search(r"\('(\w+)', (\w+), (\w+) saved log_softmax\)", line).groups()
    return node, loss, saved


def test_simulated_autocast_saves_cross_entropy_as_cuda_autocast_does():
    node, loss_dtype, saved_dtype = cuda_cross_entropy_probe()
    x, y = torch.randn(4, 8, device="meta"), torch.zeros(4, dtype=torch.long, device="meta")
    w = torch.randn(10, 8, device="meta", requires_grad=True)
    with SimulatedAutocast(torch.bfloat16):
        loss = F.cross_entropy(F.linear(x, w), y)
    cast = loss.grad_fn.next_functions[0][0]
    log_softmax = cast.next_functions[0][0]
    assert (cast.name(), str(loss.dtype), str(log_softmax._saved_result.dtype)) == (
        node, f"torch.{loss_dtype}", f"torch.{saved_dtype}")


def test_peak_holders_are_live_at_the_peak_and_sorted():
    t = simulate(RunSpec(TINY, 4, 64, "fp32", "Adam", False, True, 2))
    sizes = [h.nbytes for h in t.peak_holders]
    assert sizes == sorted(sizes, reverse=True)
    assert sum(round_size(s) for s in sizes) <= t.peak
    assert t.peak == max(t.total) and t.peak == sum(t.peak_by_category.values())


def test_validation_names_the_field_and_limit():
    with pytest.raises(InputError, match="Batch size must be between 1 and 64"):
        validate(RunSpec(TINY, 65))
    with pytest.raises(InputError, match="Sequence length"):
        validate(RunSpec(TINY, 1, 0))
    with pytest.raises(InputError, match="Steps"):
        validate(RunSpec(MLP, 1, 1, steps=4))
    with pytest.raises(InputError, match="Unknown model"):
        validate(RunSpec("ResNet-9000"))


def test_largest_fitting_interpolates_between_swept_sizes():
    assert largest_fitting((1, 2, 4), (10, 20, 40), 30) == 3
    assert largest_fitting((1, 2, 4), (10, 20, 40), 5) is None
    assert largest_fitting((1, 2, 4), (10, 20, 40), 50) == float("inf")


@pytest.mark.parametrize("model, batch, batches", [(MLP, 256, 3), (CNN, 32, 2)], ids=["page-mlp-256", "cnn-32"])
def test_logging_trap_counts_what_the_loop_keeps_and_names_what_it_leaves_out(model, batch, batches):
    """The metrics once counted the four MLP weights (40.08 MiB, seen through aten.t views) as 'live' and nothing
    else the loop read; now parameters and batch are left out by name, with their sizes, and the rest is counted."""
    trap = logging_trap(model, batch, batches)
    built = build_model(MODELS[model], 64)
    assert trap.parameter_bytes == sum(round_size(p.numel() * p.element_size()) for p in built.parameters())
    x, y = training.make_batch(MODELS[model], batch, 64, "cpu")
    assert trap.batch_bytes == round_size(x.numel() * x.element_size()) + round_size(y.numel() * y.element_size())
    assert trap.no_grad == (round_size(4),) * batches, "under no_grad only the running total stays"
    graph = trap.kept_graph[0] - trap.no_grad[0]
    assert graph > 0 and all(b - a == graph for a, b in zip(trap.kept_graph, trap.kept_graph[1:], strict=False))
    caption = training.trap_caption(trap)
    for said in (f"({model}, batch {batch})", f"parameters ({fmt_bytes(trap.parameter_bytes)}, weights and biases)",
                 f"the batch ({fmt_bytes(trap.batch_bytes)})", f"running total ({fmt_bytes(round_size(4))}:",
                 f"{fmt_bytes(graph)} more per batch"):
        assert said in caption, said


def test_cnn_convolutions_carry_the_estimated_cudnn_workspace_and_free_it_at_once():
    t = simulate(RunSpec(CNN, 8, 1, "fp32", "SGD", False, True, 1))
    without = simulate(RunSpec(CNN, 8, 1, "fp32", "SGD", False, True, 1), conv_workspace_estimate=False)
    spikes = [w for w in t.by_category["workspace"] if w]
    # 3 forward convolutions, 3 backward ones: each allocates its workspace and frees it before the next op
    assert len(spikes) == 6 and set(spikes) == {round_size(round(training.CONV_WORKSPACE_PER_SAMPLE[4] * 8))}
    assert t.by_category["workspace"][-1] == 0 and t.peak >= without.peak
    assert simulate(RunSpec(MLP, 8, 1, "fp32", "SGD", False, True, 1)).category_peaks["workspace"] == 0


@pytest.mark.parametrize("model, dtype, optimizer, set_to_none, ckpt", [
    ("Transformer tiny (2 x 128)", "fp32", "Adam", True, False),
    ("Transformer tiny (2 x 128)", "bf16 autocast", "SGD momentum", False, True),
    ("MLP (4 x 2048)", "bf16 weights", "Adam", False, False),
])
def test_a_third_step_repeats_the_second_step_s_peak(model, dtype, optimizer, set_to_none, ckpt):
    """Why the batch sweep stops at SWEEP_STEPS: from step 2 on, every step holds the same tensors at its peak."""
    two, three = (RunSpec(model, 8, 16, dtype, optimizer, ckpt, set_to_none, steps) for steps in (2, 3))
    assert training.SWEEP_STEPS == 2
    assert simulate(two).predicted_peak_allocated == simulate(three).predicted_peak_allocated
    assert training.variant_spec(three, dtype, 8).steps == 2


def test_runs_of_seconds_take_the_run_slot_and_small_ones_do_not():
    assert training.is_heavy(RunSpec("GPT-2 XL (1.5B)", steps=1))
    assert training.is_heavy(RunSpec("GPT-2 medium (355M)", steps=2))
    assert not training.is_heavy(RunSpec())  # the page's default run never waits behind a heavy one


def test_transformer_sweeps_run_fewer_batch_sizes_the_more_layers_they_have():
    assert training.sweep_batches(RunSpec("GPT-2 small (124M)")) == (16, 32, 64)
    assert training.sweep_batches(RunSpec("GPT-2 XL (1.5B)")) == (32, 64)
    assert len(training.sweep_batches(RunSpec("MLP (4 x 2048)"))) == 7


def test_workspace_is_in_the_legend_and_named_in_the_holders_only_where_a_kernel_has_one():
    from demos.memory.figures import category_legend, timeline_figure
    from demos.memory.training import Holder

    mlp = simulate(RunSpec(MLP, 8, 1, "fp32", "SGD", False, True, 1))
    cnn = simulate(RunSpec(CNN, 4, 1, "fp32", "SGD", False, True, 1))  # meta: the cuDNN workspace estimate is on
    assert not any(mlp.by_category["workspace"]) and any(cnn.by_category["workspace"])
    assert "workspace" not in {tr.name for tr in timeline_figure(mlp).data}
    assert "workspace" in {tr.name for tr in timeline_figure(cnn).data}
    assert "workspace" not in category_legend(mlp) and "workspace" in category_legend(cnn), "the colour key too"
    assert Holder("workspace", "conv workspace", (4096,), "uint8", 4096).kind.startswith("workspace")
    assert Holder("activation", "relu", (4, 8), "float32", 128).kind == "(4, 8) float32"
