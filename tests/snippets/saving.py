"""Saving & deployment: each snippet, linted and run alone, prints the numbers of the table or figure its entry
point drew."""


from demos.saving import checkpoint, export, onnx_export, quant, state
from tests.snippets import checks, fields, linted


@checks(state.state_dict_report)
def state_dict_anatomy(r, run):
    shown = fields(run(linted(r.code)))
    for name in ("model_rows", "hidden", "optimizer_state", "file_bytes_model", "file_bytes_checkpoint", "missing",
                 "unexpected", "prefixed_keys", "prefix_fixed", "safe_globals_config"):
        assert shown[name] == str(getattr(r, name)), name


@checks(checkpoint.checkpoint_demo)
def checkpoint_contents_and_the_crash(r, run):
    out = run(linted(r.code))
    for row in r.contents.rows:
        assert f"{row['item']}: {row['bytes']} bytes" in out
    for crash in r.crashes:
        assert f"{crash.strategy}: torch.load {crash.load_outcome}" in out
        for name, size, holds in crash.files:
            assert f"  {name}: {size} bytes, {holds} ({crash.new_file_bytes} bytes new)" in out
    assert r.crashes[1].load_outcome in out and r.crashes[1].loaded_step == 1


@checks(export.trace_vs_script)
def trace_vs_script(r, run):
    shown = fields(run(linted(r.code)))
    assert shown["rows"] == str(r.rows)
    assert "traced correct': False" in shown["rows"]


@checks(export.export_demo)
def export_with_cond(r, run):
    shown = fields(run(linted(r.code)))
    assert shown["checks"] == str(r.checks)
    assert shown["branch_error"] == r.branch_error.splitlines()[0]
    assert shown["dynamic_error"].startswith(r.dynamic_error.splitlines()[0])


@checks(onnx_export.onnx_roundtrip)
def onnx_roundtrip(r, run):
    shown = fields(run(linted(r.code)))
    # the file's bytes hold the source paths of the exported code, so only the graph and outputs are compared
    for name in ("nodes", "checks", "input_shape"):
        assert shown[name] == str(getattr(r, name)), name


@checks(quant.quant_report)
def quantization(r, run):
    q, s = r
    out = run(linted(q.code))
    for row in q.rows:
        measured = {k: v for k, v in row.items() if k != "latency ms (batch 256)"}  # a timing differs run to run
        assert str(measured).removesuffix("}") in out
    assert f"per-tensor: scale {s.tensor_scale:.2e}, zero point 0, mean |error| {s.tensor_mae:.3e}" in out
    assert f"{len(s.channel_scales)} scales from {min(s.channel_scales):.2e}" in out
