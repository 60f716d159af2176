"""Which export path for which target, filled with what this page measured."""


def _fmt(value, template: str, missing: str = "press its button in its tab to measure") -> str:
    return template.format(value) if value is not None else missing


def deployment_table(state=None, trace=None, export=None, onnx=None, quant=None) -> tuple[dict, ...]:
    """One row per target; each 'measured here' cell quotes a result from this page, or says how to get it."""
    trace_wrong = None if trace is None else sum(not r["traced correct"] for r in trace.rows)
    export_diff = None if export is None else max(c["max |exported - eager|"] for c in export.checks)
    onnx_diff = None if onnx is None else max(c["max |onnxruntime - eager|"] for c in onnx.checks)
    return (
        {"target": "Python service, same code base", "path": "torch.save(model.state_dict()) + load_state_dict",
         "measured here": _fmt(state and state.file_bytes_model, "weights file {:,} bytes; strict load checks keys")},
        {"target": "Python-free C++ / server (AOTInductor), mobile & edge (ExecuTorch)",
         "path": "torch.export → ExportedProgram (.pt2)",
         "measured here": _fmt(export_diff, "max |exported − eager| = {:.1e} over batches 1, 8, 64 and both branches")},
        {"target": "Legacy C++ (libtorch) deployments", "path": "TorchScript: torch.jit.script / trace (deprecated)",
         "measured here": _fmt(trace_wrong, "trace wrong on {} of 2 inputs; script right")},
        {"target": "Another runtime: onnxruntime, TensorRT, browsers (onnxruntime-web)",
         "path": "torch.onnx.export(dynamo=True) → .onnx",
         "measured here": _fmt(onnx and (onnx_diff, onnx.ort_ms, onnx.eager_ms),
                               "max diff {0[0]:.1e}; {0[1]:.3f} ms vs eager {0[2]:.3f} ms")},
        {"target": "Smaller model on CPU", "path": "int8 dynamic quantization (torchao)",
         "measured here": _fmt(quant and quant.size_ratio, "{:.1f}x smaller file")},
    )
