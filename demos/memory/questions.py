"""Predict-then-run questions for the memory page; each answer is what the snippet returns when run."""

import torch

from demos.memory.allocator import CachingAllocator, round_size
from demos.quiz import Question

ALLOCATOR_MODEL = ("this app's model of the CUDA caching allocator (demos/memory/allocator.py; its rounding and "
                   "segment sizes follow PyTorch's c10/cuda/CUDACachingAllocator.cpp)")


def _adam_state_bytes():
    torch.manual_seed(0)
    model = torch.nn.Linear(1000, 1000)
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(8, 1000)).sum().backward()
    opt.step()
    state = [t for s in opt.state.values() for k, t in s.items() if k != "step"]
    return sum(t.numel() * t.element_size() for t in state)


def _grad_vs_param_bytes():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model(torch.randn(16, 64)).sum().backward()
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters())
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    return grads == params


def _round_up():
    return round_size(1001)


def _reserved_for_4mib():
    alloc = CachingAllocator()
    alloc.malloc("x", 4 * 2**20)
    return alloc.reserved


def _reserved_after_del():
    alloc = CachingAllocator()
    alloc.malloc("x", 4 * 2**20)
    alloc.free("x")
    return f"allocated {alloc.allocated}, reserved {alloc.reserved}"


def _graphs_with_branch():
    def f(x):
        y = x.sin()
        if y.sum() > 0:
            return y.cos()
        return y.tan()

    torch._dynamo.reset()
    return torch._dynamo.explain(f)(torch.randn(8)).graph_count


def _recompiles_default():
    compiled = []

    def backend(gm, example_inputs):
        compiled.append(len(example_inputs))
        return gm.forward

    def f(x):
        return x.sin() * 2

    torch._dynamo.reset()
    g = torch.compile(f, backend=backend)
    for n in (8, 16, 32, 64):
        g(torch.ones(n))
    return len(compiled)


def _saved_tensors():
    saved = []
    x = torch.randn(4, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        torch.sin(torch.sin(x)).sum()
    return len(saved)


def _autocast_linear_dtype():
    layer = torch.nn.Linear(8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(torch.randn(2, 8))
    return out.dtype


def _grad_after_zero_grad():
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([p], lr=0.1)
    (p * 2).sum().backward()
    opt.zero_grad()
    return p.grad


QUESTIONS = (
    Question("adam_state", "Linear(1000, 1000) in fp32 with Adam: how many bytes of optimizer state "
             "(exp_avg + exp_avg_sq) exist after the first step()?", _adam_state_bytes,
             "Adam keeps two fp32 tensors per parameter: 2 × 1,001,000 parameters × 4 bytes = 8,008,000 bytes, "
             "created lazily at the first step(), not at construction.", kind="number"),
    Question("grad_bytes", "After backward, do the .grad tensors take exactly as many bytes as the parameters?",
             _grad_vs_param_bytes,
             "Each parameter gets a gradient of its own shape and dtype, so gradients cost one more copy of the "
             "weights, and they stay until zero_grad(set_to_none=True) frees them.", choices=("True", "False")),
    Question("round_up", "The CUDA caching allocator is asked for 1001 bytes. How many does it hand out?",
             _round_up, "Requests round up to a multiple of 512 bytes, so 1001 becomes 1024.", kind="number",
             imports="from demos.memory.allocator import round_size", model=ALLOCATOR_MODEL),
    Question("reserved_4mib", "One 4 MiB tensor on a fresh GPU: how many bytes does memory_reserved() report?",
             _reserved_for_4mib,
             "Requests above 1 MiB and below 10 MiB get a 20 MiB segment from cudaMalloc: reserved is 20,971,520 "
             "while allocated is 4 MiB. The rest waits in the cache for the next request.", kind="number",
             imports="from demos.memory.allocator import CachingAllocator", model=ALLOCATOR_MODEL),
    Question("after_del", "Allocate 4 MiB, then `del` it. What are allocated and reserved now?", _reserved_after_del,
             "Freeing returns the block to PyTorch's cache, not to the driver: reserved stays at 20 MiB until "
             "torch.cuda.empty_cache() (or an allocation that needs the room) releases the segment.",
             choices=("allocated 0, reserved 0", "allocated 0, reserved 20971520",
                      "allocated 4194304, reserved 20971520"),
             imports="from demos.memory.allocator import CachingAllocator", model=ALLOCATOR_MODEL),
    Question("graphs_branch", "How many graphs does torch.compile capture for a function that branches on "
             "`if y.sum() > 0:`?", _graphs_with_branch,
             "The branch depends on a tensor's value, which is unknown while tracing: dynamo breaks there, runs the "
             "`if` in Python, and traces the taken branch as a second graph: 2 graphs, 1 break.", kind="number"),
    Question("recompiles", "A compiled function is called on shapes 8, 16, 32 and 64 with default settings. "
             "How many times does it compile?", _recompiles_default,
             "The first call compiles for the exact shape 8. The second shape makes dynamo recompile with a "
             "symbolic size, and that dynamic graph serves 32 and 64: 2 compiles.", kind="number"),
    Question("saved_count", "For torch.sin(torch.sin(x)).sum() with x requiring grad, how many tensors does "
             "autograd save for backward?", _saved_tensors,
             "Each sin saves its input (the derivative is cos(input)); sum saves only a shape. Saved tensors are "
             "the activations a training step must keep until backward.", kind="number"),
    Question("autocast_dtype", "Under torch.autocast('cpu', dtype=torch.bfloat16), what dtype does nn.Linear "
             "return (the weights are fp32)?", _autocast_linear_dtype,
             "Linear is on autocast's low-precision list: inputs and a cached bf16 copy of the weight are used, so "
             "the output (and the activation saved from it) is bf16, half the bytes.",
             choices=("torch.float32", "torch.bfloat16", "torch.float16")),
    Question("zero_grad", "After opt.zero_grad() with default arguments, what is p.grad?", _grad_after_zero_grad,
             "Since PyTorch 2.0, set_to_none=True is the default: the gradient tensor is freed, not filled with "
             "zeros, so its memory is returned until the next backward.", choices=("None", "tensor([0., 0., 0.])")),
)

__all__ = ["QUESTIONS", "CachingAllocator", "round_size", "torch"]
