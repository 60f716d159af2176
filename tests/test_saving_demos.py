"""Saving & deployment demos checked against torch itself."""

import io

import pytest
import torch
from torch import nn

from demos.errors import InputError
from demos.saving import state
from demos.saving.checkpoint import _checkpoint, _saved, checkpoint_contents, crash_during_save, crash_sentence
from demos.saving.export import export_demo, trace_vs_script
from demos.saving.models import MLP, WithBuffer
from demos.saving.state import TrainingConfig, WithBufferRenamed, saved_bytes, state_dict_report
from demos.saving.targets import deployment_table


@pytest.fixture(scope="module")
def report():
    return state_dict_report()


def test_state_dict_rows_equal_torch(report):
    torch.manual_seed(0)
    sd = WithBuffer().state_dict()
    assert [r["key"] for r in report.model_rows] == list(sd)
    assert [r["bytes"] for r in report.model_rows] == [v.numel() * v.element_size() for v in sd.values()]
    assert report.hidden == ("scale",) and "scale" not in sd


def test_optimizer_state_has_adam_moments_per_parameter(report):
    names = {(r["param index"], r["state"]) for r in report.optimizer_state}
    params = list(WithBuffer().parameters())
    assert names == {(i, s) for i in range(len(params)) for s in ("step", "exp_avg", "exp_avg_sq")}
    shapes = {r["param index"]: r["shape"] for r in report.optimizer_state if r["state"] == "exp_avg"}
    assert shapes == {i: str(tuple(p.shape)) for i, p in enumerate(params)}


def test_strict_and_nonstrict_loading_match_torch(report):
    sd = WithBuffer().state_dict()
    result = WithBufferRenamed().load_state_dict(sd, strict=False)
    assert report.missing == tuple(result.missing_keys) and report.unexpected == tuple(result.unexpected_keys)
    assert "Missing key(s)" in report.strict_error and "Unexpected key(s)" in report.strict_error


def test_prefix_fix_and_file_sizes(report):
    assert all(k.startswith("module.") for k in report.prefixed_keys) and report.prefix_fixed
    assert "Missing key(s)" in report.prefix_error
    assert report.file_bytes_checkpoint > report.file_bytes_model > 0


def test_prefix_demo_moves_nothing_when_a_gpu_is_present(monkeypatch):
    # nn.DataParallel would move the model to cuda:0 in place and compare it with a CPU copy
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    model = WithBuffer()
    keys, error, same = state._prefix_demo(model)
    assert keys[0].startswith("module.") and same and "Missing key(s)" in error
    assert {p.device.type for p in model.parameters()} == {"cpu"}


def test_save_load_round_trip_is_exact():
    torch.manual_seed(3)
    model = WithBuffer()
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    fresh = WithBuffer()
    fresh.load_state_dict(torch.load(buf))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values(), strict=True))


def test_custom_class_refused_under_weights_only_then_allowed(report):
    assert report.weights_only_error.startswith("UnpicklingError") and "TrainingConfig" in report.weights_only_error
    assert report.safe_globals_config == repr(TrainingConfig())
    on_gpu = torch.cuda.is_available()  # the demo saves from CUDA tensors where there is a GPU
    assert report.locations == (("cuda:0",) if on_gpu else ("cpu",))
    assert report.device_note.startswith("saved from CUDA" if on_gpu else "no CUDA here")


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_interrupted_atomic_save_leaves_previous_checkpoint(fraction):
    naive, atomic = crash_during_save(fraction)
    assert naive.loaded_step is None and "Error" in naive.load_outcome
    assert atomic.loaded_step == 1 and atomic.load_outcome.startswith("loads")


@pytest.mark.parametrize("fraction, width", [(0.5, 128), (0.1, 32)])
def test_the_crash_sentence_says_what_each_file_left_on_disk_holds(fraction, width):
    """'File on disk after the crash: 79,573 of the new checkpoint's 79,573 bytes' described the untouched old
    checkpoint; the new bytes were in the orphaned .tmp file. Each file is now read back and compared with both."""
    old, new = (_saved(_checkpoint(step, width)) for step in (1, 2))
    written = int(len(new) * fraction)
    naive, atomic = crash_during_save(fraction, width)
    assert naive.files == (("checkpoint.pt", written, "the start of the new checkpoint"),)
    assert atomic.files == (("checkpoint.pt", len(old), "the old checkpoint"),
                            ("checkpoint.pt.tmp", written, "the start of the new checkpoint"))
    said = crash_sentence(naive, width)
    assert (f"`checkpoint.pt`: {written:,} bytes, the first {written:,} of the new checkpoint's {len(new):,} bytes"
            in said)
    assert "No file holds the old checkpoint any more." in said and ".tmp" not in said
    said = crash_sentence(atomic, width)
    assert f"`checkpoint.pt`: {len(old):,} bytes, the old checkpoint (step 1), byte for byte" in said
    assert f"`checkpoint.pt.tmp`: {written:,} bytes, the first {written:,} of the new checkpoint's {len(new):,}" in said
    assert "the orphaned `checkpoint.pt.tmp`, never renamed" in said and "No file holds" not in said
    assert f"(width {width} weights and the step)" in said


def test_crash_point_is_validated():
    with pytest.raises(InputError, match="strictly between 0 and 1"):
        crash_during_save(1.0)


def test_checkpoint_contents_bytes_are_what_torch_save_writes():
    rows = checkpoint_contents(64).rows
    assert [r["item"] for r in rows if r["serving"] == "yes"] == ["model.state_dict()"]
    optimizer = next(r for r in rows if r["item"] == "optimizer.state_dict()")
    model = next(r for r in rows if r["item"] == "model.state_dict()")
    assert 1.8 < optimizer["bytes"] / model["bytes"] < 2.2, "AdamW keeps two moments per weight"
    assert model["bytes"] == saved_bytes(MLP(width=64).state_dict())


def test_trace_diverges_from_script_on_the_other_branch():
    wrong = trace_vs_script(-3.0)
    assert wrong.rows[0]["traced correct"] and not wrong.rows[1]["traced correct"]
    assert all(r["scripted correct"] for r in wrong.rows)
    assert any(w.startswith("TracerWarning") for w in wrong.trace_warnings)
    assert any("deprecated" in w for w in wrong.script_warnings)
    assert "if" not in wrong.traced_code and "if" in wrong.scripted_code
    same = trace_vs_script(3.0)
    assert all(r["traced correct"] for r in same.rows)
    with pytest.raises(InputError, match="between"):
        trace_vs_script(1e6)


def test_export_refuses_the_branch_and_cond_matches_eager():
    e = export_demo()
    assert "data-dependent" in e.branch_error
    assert "torch.ops.higher_order.cond" in e.graph_code
    assert {c["batch"] for c in e.checks} == {1, 8, 64}
    assert max(c["max |exported - eager|"] for c in e.checks) <= 1e-6
    assert "64" in e.dynamic_error
    rows = deployment_table(export=e)
    assert "press its button" not in rows[1]["measured here"]


def test_dp_prefix_question_answers_as_dataparallel_without_touching_cuda(monkeypatch):
    from demos.saving.questions import QUESTIONS
    question = next(q for q in QUESTIONS if q.key == "dp_prefix")
    expected = next(iter(nn.DataParallel(nn.Linear(2, 2)).state_dict()))  # no GPU needed for the keys
    monkeypatch.setattr(nn, "DataParallel", None)  # the answer must not construct one (it would move to cuda:0)
    monkeypatch.setattr(torch.cuda, "_lazy_init", lambda: pytest.fail("the question initialised CUDA"))
    assert question.run() == expected == "module.weight"
