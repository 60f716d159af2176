"""ONNX: the dynamo exporter with a dynamic batch axis, run in onnxruntime and compared with eager."""

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from demos.isolated import run_isolated
from demos.saving.models import MLP, check_size
from demos.shown import entry, print_each, script
from demos.timing import median_ms

LATENCY_RUNS = 50


@dataclass(frozen=True)
class OnnxResult:
    nodes: tuple[dict, ...]  # op_type, inputs, outputs
    dot: str
    file_bytes: int
    checks: tuple[dict, ...]  # batch, output shape, max |onnxruntime - eager|
    eager_ms: float
    ort_ms: float
    export_s: float
    input_shape: str  # as onnxruntime reports it: the batch axis is symbolic
    code: str


def _node_dot(nodes) -> str:
    """Graph of ONNX nodes: an edge wherever one node's output is another's input."""
    producers = {out: i for i, n in enumerate(nodes) for out in n["outputs"]}
    lines = ['digraph onnx {', '  rankdir=TB; node [shape=box, style="rounded,filled", fillcolor="#dbe9f6"];']
    lines.append('  input [label="input x\\n(batch, 16)", shape=ellipse, fillcolor="#d4f1f4"];')
    for i, n in enumerate(nodes):
        lines.append(f'  n{i} [label="{n["op_type"]}"];')
        sources = [producers[name] for name in n["inputs"] if name in producers]
        for src in sources:
            lines.append(f"  n{src} -> n{i};")
        if "x" in n["inputs"]:
            lines.append(f"  input -> n{i};")
    lines.append("}")
    return "\n".join(lines)


def export_and_run(width: int, depth: int) -> dict:
    """Export an MLP with a dynamic batch, run batches 1 and 8 in onnxruntime, compare with eager, time both."""
    import onnx
    import onnxruntime as ort

    torch.manual_seed(0)
    model = MLP(width=width, depth=depth).eval()
    example = torch.randn(2, 16)
    batch = torch.export.Dim("batch", min=1, max=1024)
    with tempfile.TemporaryDirectory(prefix="wb-onnx-") as folder:
        path = Path(folder) / "mlp.onnx"
        start = time.perf_counter()
        program = torch.onnx.export(model, (example,), input_names=["x"], dynamic_shapes={"x": {0: batch}},
                                    dynamo=True, verbose=False)
        program.save(str(path))
        export_s = time.perf_counter() - start
        proto = onnx.load(str(path))
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        file_bytes = path.stat().st_size
    name = session.get_inputs()[0].name
    checks = []
    with torch.no_grad():
        for n in (1, 8):
            x = torch.randn(n, 16, generator=torch.Generator().manual_seed(n))
            out = session.run(None, {name: x.numpy()})[0]
            diff = (torch.from_numpy(out) - model(x)).abs().max().item()
            checks.append({"batch": n, "output shape": str(tuple(out.shape)), "max |onnxruntime - eager|": diff})
        x = torch.randn(32, 16)
        eager_ms = median_ms(lambda: model(x), LATENCY_RUNS)
    x_np = x.numpy()
    ort_ms = median_ms(lambda: session.run(None, {name: x_np}), LATENCY_RUNS)
    return {"nodes": tuple({"op_type": n.op_type, "inputs": tuple(n.input), "outputs": tuple(n.output)}
                           for n in proto.graph.node),
            "file_bytes": file_bytes, "checks": tuple(checks), "eager_ms": eager_ms, "ort_ms": ort_ms,
            "export_s": export_s, "input_shape": str(session.get_inputs()[0].shape)}


@entry(16, 1)
def onnx_roundtrip(width: int = 64, depth: int = 2) -> OnnxResult:
    """export_and_run at the visitor's size, with its graph drawn and the code that ran."""
    check_size(width, depth)
    code = script(MLP, median_ms, export_and_run, imports=IMPORTS, settings={"width": width, "depth": depth},
                  run=print_each("export_and_run(width, depth)"))
    result = export_and_run(width, depth)
    return OnnxResult(**result, dot=_node_dot(result["nodes"]), code=code)


def onnx_in_child(width: int, depth: int) -> OnnxResult:
    """onnx_roundtrip in a child process: onnx and onnxruntime leave with it."""
    return run_isolated(onnx_roundtrip, width, depth)


IMPORTS = """import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

LATENCY_RUNS = 50"""
