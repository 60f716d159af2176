"""Generated questions on modules: freezing, parameter counts, hooks, layer output shapes, state_dict, memory."""

import random

from demos.practice.family import Family, plural, shape_text
from demos.quiz import Question

NN = "import torch\nfrom torch import nn\n\n"


def _widths(rng: random.Random, layers: int) -> list[int]:
    return [rng.randint(2, 8) for _ in range(layers + 1)]


def _mlp(widths: list[int], biases: list[bool]) -> str:
    parts = []
    for i, bias in enumerate(biases):
        parts.append(f"nn.Linear({widths[i]}, {widths[i + 1]}{'' if bias else ', bias=False'})")
        if i < len(biases) - 1:
            parts.append("nn.ReLU()")
    return "nn.Sequential(" + ", ".join(parts) + ")"


def frozen_question(rng: random.Random) -> Question:
    layers = rng.randint(2, 4)
    widths, biases = _widths(rng, layers), [rng.random() < 0.7 for _ in range(layers)]
    frozen = sorted(rng.sample(range(layers), rng.randint(1, layers - 1)))
    indices = [2 * i for i in frozen]  # Linear layers sit at even positions, ReLUs between them
    code = (NN + f"model = {_mlp(widths, biases)}\nfor i in {indices}:\n    model[i].requires_grad_(False)\n"
            f"model(torch.ones(1, {widths[0]})).sum().backward()\n"
            "print(sum(p.grad is not None for p in model.parameters()))\n")
    live = sum(1 + biases[i] for i in range(layers) if i not in frozen)
    total = sum(1 + b for b in biases)
    return Question.from_code(
        "", f"In this MLP, {' and '.join(f'model[{i}]' for i in indices)} "
            f"{'is' if len(indices) == 1 else 'are'} frozen. After one backward, how "
            "many parameter tensors have a .grad?",
        code, f"Frozen parameters get no .grad, but gradients still flow through them to earlier layers. Of the "
              f"{total} parameter tensors (weights, and biases where bias=True), the unfrozen layers hold {live}.",
        kind="number",
    )


def _layer(rng: random.Random) -> tuple[str, int, str]:
    """(code, parameter count, how it is counted) for one random layer."""
    kind = rng.choice(["linear", "conv", "batchnorm", "embedding", "layernorm"])
    if kind == "linear":
        i, o, bias = rng.randint(2, 64), rng.randint(2, 64), rng.random() < 0.7
        return (f"nn.Linear({i}, {o}{'' if bias else ', bias=False'})", i * o + bias * o,
                f"Linear {i}×{o}" + (f" + {o} bias" if bias else ""))
    if kind == "conv":
        i, o, k, bias = rng.randint(1, 16), rng.randint(1, 16), rng.choice((1, 3, 5)), rng.random() < 0.7
        return (f"nn.Conv2d({i}, {o}, {k}{'' if bias else ', bias=False'})", o * i * k * k + bias * o,
                f"Conv2d {o}×{i}×{k}×{k}" + (f" + {o} bias" if bias else ""))
    if kind == "batchnorm":
        n = rng.randint(2, 64)
        return f"nn.BatchNorm1d({n})", 2 * n, f"BatchNorm 2×{n} (running stats are buffers, not parameters)"
    if kind == "embedding":
        n, d = rng.randint(5, 100), rng.randint(2, 16)
        return f"nn.Embedding({n}, {d})", n * d, f"Embedding {n}×{d}"
    d = rng.randint(2, 64)
    return f"nn.LayerNorm({d})", 2 * d, f"LayerNorm 2×{d}"


def param_count_question(rng: random.Random) -> Question:
    layers = [_layer(rng) for _ in range(rng.randint(2, 3))]
    code = (NN + "model = nn.ModuleList([" + ", ".join(c for c, _, _ in layers) + "])\n"
            "print(sum(p.numel() for p in model.parameters()))\n")
    total = sum(n for _, n, _ in layers)
    return Question.from_code(
        "", "How many numbers does model.parameters() hold for this ModuleList?", code,
        f"{'; '.join(f'{how} = {n}' for _, n, how in layers)}. Together: {total}.", kind="number",
    )


def hooks_question(rng: random.Random) -> Question:
    registered, calls = rng.randint(1, 5), rng.randint(1, 4)
    removed = rng.randint(0, registered)
    remove = f"for h in handles[:{removed}]:\n    h.remove()\n" if removed else ""
    code = (NN + "layer = nn.Linear(2, 2)\nlog = []\n"
            f"handles = [layer.register_forward_hook(lambda m, i, o: log.append(1)) for _ in range({registered})]\n"
            f"{remove}for _ in range({calls}):\n    layer(torch.ones(1, 2))\nprint(len(log))\n")
    live = registered - removed
    prompt = (f"A forward hook is registered {plural(registered, 'time')} on one layer" +
              (f", {removed} of the handles are removed," if removed else ",") +
              f" then the layer runs {plural(calls, 'time')}. How many entries does log have?")
    return Question.from_code(
        "", prompt, code,
        f"Every registration adds another hook, even of the same function; remove() takes one away. "
        f"{plural(live, 'hook')} × {plural(calls, 'forward call')} = {live * calls}.", kind="number",
    )


def _out(size: int, k: int, s: int, p: int) -> int:
    return (size + 2 * p - k) // s + 1


def conv_shape_question(rng: random.Random) -> Question:
    given = (rng.randint(1, 8), rng.choice((1, 3)), rng.randint(16, 64), rng.randint(16, 64))
    _, c, h, w = given
    layers, steps = [], []
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.6:
            o, k, s, p = rng.choice((4, 8, 16)), rng.choice((1, 3, 5)), rng.choice((1, 2)), rng.choice((0, 1, 2))
            layers.append(f"nn.Conv2d({c}, {o}, kernel_size={k}, stride={s}, padding={p})")
            c = o
        else:
            k = rng.choice((2, 3))
            s, p = k, 0
            layers.append(f"nn.MaxPool2d({k})")
        h, w = _out(h, k, s, p), _out(w, k, s, p)
        steps.append(f"{layers[-1].split('(')[0]} (k={k}, s={s}, p={p}) gives {h}×{w}")
    code = (NN + "model = nn.Sequential(\n" + "".join(f"    {layer},\n" for layer in layers) + ")\n"
            f"print(model(torch.ones{shape_text(given)}).shape)\n")
    return Question.from_code(
        "", f"What shape comes out of this stack for an input of shape {shape_text(given)}?", code,
        "Each layer maps a size n to ⌊(n + 2p − k) / s⌋ + 1 (MaxPool's stride defaults to its kernel): "
        f"{'; '.join(steps)}. Channels come from the last Conv2d: {shape_text((given[0], c, h, w))}.",
        kind="shape",
    )


def _entry(rng: random.Random, i: int) -> tuple[str, str, int, str]:
    """(module code, extra line, state_dict entries, why) for one module of a Sequential at index i."""
    kind = rng.choice(["linear", "batchnorm", "dropout", "relu", "buffer"])
    n = rng.randint(2, 8)
    if kind == "linear":
        bias = rng.random() < 0.7
        return (f"nn.Linear({n}, {n}{'' if bias else ', bias=False'})", "", 1 + bias,
                "Linear: weight" + (" and bias" if bias else ""))
    if kind == "batchnorm":
        return (f"nn.BatchNorm1d({n})", "", 5,
                "BatchNorm1d: weight, bias, running_mean, running_var and num_batches_tracked")
    if kind in ("dropout", "relu"):
        made = "nn.Dropout(0.5)" if kind == "dropout" else "nn.ReLU()"
        return made, "", 0, f"{made.split('(')[0].removeprefix('nn.')}: nothing"
    persistent = rng.random() < 0.5
    line = f"model[{i}].register_buffer('mask', torch.ones({n}), persistent={persistent})"
    return (f"nn.Linear({n}, {n})", line, 2 + persistent,
            "Linear: weight and bias" + (", plus its persistent buffer 'mask'" if persistent else
                                         " (its buffer registered with persistent=False is left out)"))


def state_dict_question(rng: random.Random) -> Question:
    entries = [_entry(rng, i) for i in range(rng.randint(2, 4))]
    extra = "".join(line + "\n" for _, line, _, _ in entries if line)
    modules = ", ".join(m for m, _, _, _ in entries)
    code = NN + f"model = nn.Sequential({modules})\n{extra}print(len(model.state_dict()))\n"
    total = sum(n for _, _, n, _ in entries)
    return Question.from_code(
        "", "How many entries does model.state_dict() have?", code,
        f"state_dict holds parameters and persistent buffers: {'; '.join(why for _, _, _, why in entries)}. "
        f"Total: {total}.", kind="number",
    )


OPTIMIZERS = {
    "SGD": ("torch.optim.SGD(model.parameters(), lr=0.1)", 0, False, "plain SGD keeps no state"),
    "SGD with momentum": ("torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)", 1, False,
                          "momentum keeps one buffer per parameter"),
    "Adam": ("torch.optim.Adam(model.parameters())", 2, True,
             "Adam keeps exp_avg and exp_avg_sq per parameter, plus a 4-byte float32 'step' tensor each"),
}
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def training_bytes_question(rng: random.Random) -> Question:
    a, b, c = rng.choice((16, 32, 64, 100, 128)), rng.choice((16, 32, 64, 256)), rng.choice((1, 10, 16))
    dtype, name = rng.choice(list(BYTES)), rng.choice(list(OPTIMIZERS))
    make, copies, step, why = OPTIMIZERS[name]
    code = (NN + f"model = nn.Sequential(nn.Linear({a}, {b}), nn.ReLU(), nn.Linear({b}, {c})).to(torch.{dtype})\n"
            f"opt = {make}\nmodel(torch.ones(2, {a}, dtype=torch.{dtype})).sum().backward()\nopt.step()\n"
            "tensors = [p for p in model.parameters()] + [p.grad for p in model.parameters()]\n"
            "tensors += [t for s in opt.state.values() for t in s.values() if torch.is_tensor(t)]\n"
            "print(sum(t.numel() * t.element_size() for t in tensors))\n")
    params = a * b + b + b * c + c
    total = params * BYTES[dtype] * (2 + copies) + 4 * 4 * step
    state = "no state copies" if copies == 0 else "1 state copy" if copies == 1 else f"{copies} state copies"
    return Question.from_code(
        "", f"A Linear({a}, {b}) → Linear({b}, {c}) model in {dtype} trained with {name}: after one step, how many "
            "bytes do its parameters, gradients and optimizer state hold?",
        code, f"{params} parameters × {BYTES[dtype]} bytes each, for the weights, the gradients and {state}: "
              f"{why}" + (" (4 tensors)" if step else "") + f". Total: {total} bytes.", kind="number",
    )


FAMILIES = (
    Family("frozen", "Which parameters get .grad after freezing", "modules", "Freezing", frozen_question,
           "Freezing layers", (("modules_tab", "Freezing"),)),
    Family("param_count", "Parameter count of a small module", "modules", "Parameter counts", param_count_question,
           "Parameters vs buffers", (("modules_tab", "Parameters & buffers"),)),
    Family("hooks", "How often forward hooks fire", "modules", "Hooks", hooks_question,
           "Forward and backward hooks", (("modules_tab", "Hooks"),)),
    Family("conv_shape", "Output shape through a Conv/Pool stack", "modules", "Layer shapes", conv_shape_question),
    Family("state_dict", "Entries of a state_dict", "saving", "state_dict", state_dict_question, "state_dict"),
    Family("train_bytes", "Bytes of parameters, gradients and optimizer state", "memory", "Training memory",
           training_bytes_question, "Memory by category", (("mem_tab", "Training step"),)),
)
