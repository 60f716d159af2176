"""Hooks on a small CNN: what forward, pre-forward, full-backward and tensor hooks receive, and what they can change."""

import math
import warnings
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from demos.errors import InputError, quoted
from demos.modules.common import MODULE_IMPORTS, norm
from demos.modules.inputs import parse_channels, parse_hook_value
from demos.shown import Script, entry, script
from demos.threads import single_threaded

PATTERNS = ("disc", "stripes", "checker")
PRE_HOOKS = ("flip", "invert", "grayscale")
SURGERY_MODES = ("scale", "clip")
MIN_SIZE, MAX_SIZE = 8, 64  # 8 pixels survive the 3 poolings of the deepest net
BATCH, CLASSES, BINS = 2, 3, 30
HOOK_IMPORTS = ("import math\nfrom collections import OrderedDict\n\n"
                "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F")
MAX_CALLS = 10


class SmallCNN(nn.Module):
    """conv -> relu -> pool blocks, then flatten and a linear classifier: every layer can be hooked."""

    def __init__(self, channels=(4, 8), image_size=32, classes=3):
        super().__init__()
        layers, c_in = [], 3
        for i, c in enumerate(channels, 1):
            layers += [(f"conv{i}", nn.Conv2d(c_in, c, 3, padding=1)), (f"relu{i}", nn.ReLU()),
                       (f"pool{i}", nn.MaxPool2d(2))]
            c_in = c
        self.features = nn.Sequential(OrderedDict(layers))
        self.flatten = nn.Flatten()
        side = image_size // 2 ** len(channels)
        self.fc = nn.Linear(c_in * side * side, classes)

    def forward(self, x):
        x = self.features(x)
        x = self.flatten(x)
        return self.fc(x)


def synthetic_images(pattern: str = "disc", size: int = 32, seed: int = 0, batch: int = BATCH) -> torch.Tensor:
    """A seeded batch of RGB images in [0, 1]: a coloured disc, stripes or a checkerboard, plus a little noise."""
    g = torch.Generator().manual_seed(seed)
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
    images = []
    for _ in range(batch):
        a, b, c = torch.rand(3, generator=g)
        if pattern == "disc":
            mask = ((xs - (a - 0.5)) ** 2 + (ys - (b - 0.5)) ** 2 < (0.2 + 0.4 * c) ** 2).float()
        elif pattern == "stripes":
            angle = math.pi * a
            mask = (torch.sin((xs * math.cos(angle) + ys * math.sin(angle)) * (4 + 8 * b)) > 0).float()
        else:
            cells = 2 + int(6 * c)
            mask = (((xs + 1) * cells / 2).floor() + ((ys + 1) * cells / 2).floor()).remainder(2)
        fg, bg = torch.rand(3, 1, 1, generator=g), torch.rand(3, 1, 1, generator=g)
        image = fg * mask + bg * (1 - mask) + 0.05 * torch.randn(3, size, size, generator=g)
        images.append(image.clamp(0, 1))
    return torch.stack(images)


def validate(channels_text: str, image_size: int, pattern: str) -> tuple[int, ...]:
    """Parsed channels, after checking the image size and the pattern."""
    channels = parse_channels(channels_text)
    if pattern not in PATTERNS:
        raise InputError(f"Pattern must be one of {', '.join(PATTERNS)}; got {quoted(pattern)}.")
    if not MIN_SIZE <= image_size <= MAX_SIZE:
        raise InputError(f"Image size must be between {MIN_SIZE} and {MAX_SIZE} pixels; got {image_size}.")
    return channels


def build(channels: tuple[int, ...], image_size: int, pattern: str, seed: int):
    """The seeded model, its input batch and the integer targets."""
    torch.manual_seed(seed)
    model = SmallCNN(channels, image_size, CLASSES)
    x = synthetic_images(pattern, image_size, seed)
    target = torch.arange(BATCH) % CLASSES
    return model, x, target


def leaf_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Modules with no children, in registration (= forward) order."""
    return [(n, m) for n, m in model.named_modules() if not list(m.children())]


def hook_count(model: nn.Module) -> int:
    """Hooks still registered anywhere in the model (forward, pre-forward, backward, backward-pre)."""
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
               + len(m._backward_pre_hooks) for m in model.modules())


def shape_text(t) -> str:
    """A tensor's shape, or a tuple of them, as text."""
    if isinstance(t, torch.Tensor):
        return str(tuple(t.shape))
    if t is None:
        return "None"
    return "(" + ", ".join(shape_text(v) for v in t) + ")"


@dataclass(frozen=True)
class LayerView:
    name: str
    kind: str
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    out_mean: float
    out_std: float
    zero_fraction: float
    hist_counts: tuple[int, ...]
    hist_edges: tuple[float, ...]
    matches_layer: bool  # the hooked output equals the layer applied to the hooked input
    grad_output_norm: float | None
    grad_input_norm: float | None


@dataclass(frozen=True)
class HookEvent:
    order: int
    phase: str  # pre-forward, forward, tensor, full-backward
    layer: str
    received: str


@dataclass(frozen=True)
class HookRun:
    channels: tuple[int, ...]
    image_size: int
    images: np.ndarray  # (B, H, W, 3) uint8, the input as seen by conv1
    layers: tuple[LayerView, ...]
    feature_maps: tuple[tuple[str, np.ndarray], ...]  # conv layer name, (C, H, W) of image 0
    events: tuple[HookEvent, ...]
    logits: tuple[tuple[float, ...], ...]
    hooks_registered: int
    hooks_left: int
    warnings: tuple[str, ...]  # what torch warned while the hooks ran
    code: Script


def to_uint8(images: torch.Tensor) -> np.ndarray:
    """(B, 3, H, W) in [0, 1] -> (B, H, W, 3) uint8 for an image plot."""
    return (images.permute(0, 2, 3, 1).clamp(0, 1) * 255).round().to(torch.uint8).numpy()


@entry("3, 5", 16, "stripes", 2, entries=8)
def hook_outputs(channels_text: str = "4, 8", image_size: int = 32, pattern: str = "disc", seed: int = 0) -> HookRun:
    """Every leaf layer hooked four ways over one forward and backward; all hooks removed afterwards."""
    channels = validate(channels_text, image_size, pattern)
    model, x, target = build(channels, image_size, pattern, seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events, seen, grads, logits, registered = hook_every_layer(model, x, target)
    layers = tuple(_layer_view(name, layer, seen[name], grads.get(name)) for name, layer in leaf_layers(model))
    maps = tuple((name, seen[name][1][0].numpy()) for name, layer in leaf_layers(model)
                 if isinstance(layer, nn.Conv2d))
    code = script(SmallCNN, synthetic_images, build, leaf_layers, hook_count, shape_text, norm, hook_every_layer,
                  imports=HOOK_IMPORTS, settings={"BATCH": BATCH, "CLASSES": CLASSES, "channels": channels,
                                                  "image_size": image_size, "pattern": pattern, "seed": seed}, run="""
model, x, target = build(channels, image_size, pattern, seed)
events, seen, grads, logits, registered = hook_every_layer(model, x, target)
for phase, layer, received in events:
    print(f"{phase:13}", layer, received)
print("hooks registered during the run:", registered, "after:", hook_count(model))
print("logits", logits.tolist())""")
    return HookRun(channels, image_size, to_uint8(x), layers, maps,
                   tuple(HookEvent(i, *event) for i, event in enumerate(events)),
                   tuple(tuple(r) for r in logits.detach().tolist()), registered, hook_count(model),
                   tuple(dict.fromkeys(str(w.message).split(" See ")[0] for w in caught)), code)


def hook_every_layer(model: nn.Module, x: torch.Tensor, target: torch.Tensor):
    """Every leaf layer hooked four ways (forward pre-hook, forward hook, a tensor hook on its output, full backward
    hook) over one forward and backward, then unhooked. Returns the calls in the order they fired (phase, layer,
    what the hook received), each layer's (input, output), each layer's gradient norms (output, input), the logits,
    and how many hooks were registered during the run."""
    events, seen, grads, handles = [], {}, {}, []

    def log(phase, layer, received):
        events.append((phase, layer, received))

    for name, layer in leaf_layers(model):
        def pre(module, args, name=name):
            log("pre-forward", name, f"args {shape_text(args)}")

        def fwd(module, args, output, name=name):
            seen[name] = (args[0].detach(), output.detach())
            log("forward", name, f"args {shape_text(args)} → output {shape_text(output)}")
            if output.requires_grad:
                output.register_hook(lambda g, name=name: log("tensor", name, f"grad {shape_text(g)} "
                                                                              f"norm {norm(g):.3g}"))

        def bwd(module, grad_input, grad_output, name=name):
            grads[name] = (norm(grad_output[0]), norm(grad_input[0]) if grad_input[0] is not None else None)
            log("full-backward", name, f"grad_output {shape_text(grad_output)} norm {norm(grad_output[0]):.3g}, "
                                       f"grad_input {shape_text(grad_input)}")

        handles += [layer.register_forward_pre_hook(pre), layer.register_forward_hook(fwd),
                    layer.register_full_backward_hook(bwd)]
    registered = hook_count(model)
    logits = model(x)
    F.cross_entropy(logits, target).backward()
    for h in handles:
        h.remove()  # hooks stay until removed: always keep the handle
    return events, seen, grads, logits, registered


def _layer_view(name: str, layer: nn.Module, io, grad) -> LayerView:
    inp, out = io
    with torch.no_grad():
        matches = torch.equal(layer(inp), out)
    counts, edges = torch.histogram(out.float().flatten(), bins=BINS)
    g_out, g_in = grad if grad else (None, None)
    return LayerView(name, type(layer).__name__, tuple(inp.shape), tuple(out.shape), float(out.mean()),
                     float(out.std()), float((out == 0).float().mean()), tuple(int(c) for c in counts),
                     tuple(edges.tolist()), matches, g_out, g_in)


# ---- a forward pre-hook that changes the input ----------------------------------------------------------------


def transform_input(kind: str, x: torch.Tensor) -> torch.Tensor:
    """What the pre-hook does to conv1's input."""
    if kind == "flip":
        return x.flip(-1)
    if kind == "invert":
        return 1 - x
    return x.mean(dim=1, keepdim=True).expand_as(x)


@dataclass(frozen=True)
class PreHookEffect:
    kind: str
    images_seen: np.ndarray  # what conv1 received with the hook
    logits_plain: tuple[tuple[float, ...], ...]
    logits_hooked: tuple[tuple[float, ...], ...]
    equals_transformed_input: bool  # model+hook(x) == model(transform(x)), bit for bit
    code: Script


@entry("3, 5", 16, "stripes", 2, "invert")
def pre_hook_effect(channels_text="4, 8", image_size=32, pattern="disc", seed=0, kind="flip") -> PreHookEffect:
    """A forward pre-hook on conv1 returns a changed input; the model then computes on that input."""
    channels = validate(channels_text, image_size, pattern)
    if kind not in PRE_HOOKS:
        raise InputError(f"The pre-hook must be one of {', '.join(PRE_HOOKS)}; got {quoted(kind)}.")
    model, x, _ = build(channels, image_size, pattern, seed)
    plain, hooked, direct, received = with_pre_hook(model, x, kind)
    code = script(SmallCNN, synthetic_images, build, transform_input, with_pre_hook, imports=HOOK_IMPORTS,
                  settings={"BATCH": BATCH, "CLASSES": CLASSES, "channels": channels, "image_size": image_size,
                            "pattern": pattern, "seed": seed, "kind": kind}, run="""
model, x, target = build(channels, image_size, pattern, seed)
plain, hooked, direct, received = with_pre_hook(model, x, kind)
print("plain ", plain.tolist())
print("hooked", hooked.tolist())
print("hooked == model(transformed x):", torch.equal(hooked, direct))""")
    return PreHookEffect(kind, to_uint8(received), tuple(map(tuple, plain.tolist())),
                         tuple(map(tuple, hooked.tolist())), torch.equal(hooked, direct), code)


def with_pre_hook(model: nn.Module, x: torch.Tensor, kind: str):
    """The model's output without a hook, with a forward pre-hook on conv1 that changes its input, and on the
    changed input directly; and the input conv1 received."""
    received = {}

    def change_input(module, args):
        received["x"] = transform_input(kind, args[0])
        return (received["x"],)  # returning a tuple replaces the positional args

    with torch.no_grad():
        plain = model(x)
        handle = model.features.conv1.register_forward_pre_hook(change_input)
        hooked = model(x)
        handle.remove()
        direct = model(transform_input(kind, x))
    return plain, hooked, direct, received["x"]


# ---- a forward hook that zeroes a channel ---------------------------------------------------------------------


@dataclass(frozen=True)
class ChannelZeroEffect:
    enabled: bool
    layer: str
    channel: int
    zeroed_max_abs: float  # of the zeroed channel in the hooked output: 0
    relative_change: tuple[tuple[str, float], ...]  # per leaf layer: ||hooked - plain|| / ||plain||
    logits_plain: tuple[tuple[float, ...], ...]
    logits_hooked: tuple[tuple[float, ...], ...]
    equals_zeroed_weights: bool  # same logits as zeroing that filter's weight and bias, no hook
    code: Script


def conv_names(channels: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(f"conv{i}" for i in range(1, len(channels) + 1))


@entry("3, 5", 16, "stripes", 2, "conv2", 4)
def zero_channel_effect(channels_text="4, 8", image_size=32, pattern="disc", seed=0, layer="conv1",
                        channel=0, enabled=True) -> ChannelZeroEffect:
    """A forward hook returns the conv output with one channel zeroed; every later layer sees the change.

    With enabled=False the hook is never registered, so the 'hooked' run is the plain one."""
    channels = validate(channels_text, image_size, pattern)
    if layer not in conv_names(channels):
        raise InputError(f"Layer must be one of {', '.join(conv_names(channels))}; got {quoted(layer)}.")
    width = channels[int(layer[4:]) - 1]
    if not 0 <= channel < width:
        raise InputError(f"{layer} has {width} channels, so the channel must be between 0 and {width - 1}.")
    model, x, _ = build(channels, image_size, pattern, seed)
    plain, hooked, direct = with_channel_zeroed(model, x, layer, channel, enabled)
    change = tuple((n, float((hooked[n] - plain[n]).norm() / plain[n].norm().clamp_min(1e-12))) for n in plain)
    code = script(SmallCNN, synthetic_images, build, leaf_layers, outputs_per_layer, with_channel_zeroed,
                  imports=HOOK_IMPORTS, settings={"BATCH": BATCH, "CLASSES": CLASSES, "channels": channels,
                                                  "image_size": image_size, "pattern": pattern, "seed": seed,
                                                  "layer": layer, "channel": channel, "enabled": enabled}, run="""
model, x, target = build(channels, image_size, pattern, seed)
plain, hooked, direct = with_channel_zeroed(model, x, layer, channel, enabled)
print("plain ", plain["fc"].tolist())
print("hooked", hooked["fc"].tolist())
print("hooked == the channel's weights zeroed:", torch.allclose(direct, hooked["fc"], atol=1e-6))""")
    return ChannelZeroEffect(enabled, layer, channel, float(hooked[f"features.{layer}"][:, channel].abs().max()),
                             change, tuple(map(tuple, plain["fc"].tolist())), tuple(map(tuple, hooked["fc"].tolist())),
                             torch.allclose(direct, hooked["fc"], atol=1e-6), code)


def with_channel_zeroed(model: nn.Module, x: torch.Tensor, layer: str, channel: int, enabled: bool = True):
    """Every leaf's output without and with a forward hook on `layer` that zeroes one output channel (not registered
    when enabled is False), and the model's output with that channel's weights zeroed instead."""
    conv = getattr(model.features, layer)

    def zero(module, args, output):
        output = output.clone()
        output[:, channel] = 0
        return output  # a forward hook's return value replaces the output

    plain = outputs_per_layer(model, x)
    handle = conv.register_forward_hook(zero) if enabled else None
    hooked = outputs_per_layer(model, x)
    if handle is not None:
        handle.remove()
    with torch.no_grad():
        conv.weight[channel] = 0
        conv.bias[channel] = 0
        direct = model(x)
    return plain, hooked, direct


def outputs_per_layer(model: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every leaf's output for one forward, caught by temporary forward hooks (registered after any others)."""
    outputs, handles = {}, []
    for name, layer in leaf_layers(model):
        handles.append(layer.register_forward_hook(lambda m, a, out, name=name: outputs.__setitem__(name, out)))
    with torch.no_grad():
        model(x)
    for h in handles:
        h.remove()
    return outputs


# ---- a tensor hook for gradient surgery -----------------------------------------------------------------------


@dataclass(frozen=True)
class SurgeryResult:
    enabled: bool
    mode: str
    value: float
    tensor_grad_norm_plain: float
    tensor_grad_norm_hooked: float
    tensor_grad_max_plain: float
    tensor_grad_max_hooked: float
    param_grad_norms: tuple[tuple[str, float, float], ...]  # name, plain, hooked
    verified: bool  # hooked upstream grads == grads computed from the edited gradient by hand
    code: Script


@entry("3, 5", 16, "stripes", 2, "clip", "0.001")
@single_threaded  # the shown script pins one thread too, so it prints these numbers
def grad_surgery(channels_text="4, 8", image_size=32, pattern="disc", seed=0, mode="scale",
                 value_text="0.5", enabled=True) -> SurgeryResult:
    """register_hook on the last conv block's output edits its gradient; only layers before it feel it.

    With enabled=False no tensor hook is registered, so the 'hooked' gradients are the plain ones."""
    channels = validate(channels_text, image_size, pattern)
    if mode not in SURGERY_MODES:
        raise InputError(f"The mode must be one of {', '.join(SURGERY_MODES)}; got {quoted(mode)}.")
    value = parse_hook_value(value_text, mode)
    plain = surgery_pass(channels, image_size, pattern, seed, None)
    hooked = surgery_pass(channels, image_size, pattern, seed, (mode, value) if enabled else None)
    names = [n for n, _ in plain["params"]]
    if enabled:
        verified = _verify_surgery(channels, image_size, pattern, seed, mode, value, hooked)
    else:
        verified = all(torch.equal(plain["grads"][n], hooked["grads"][n]) for n in names)
    rows = tuple((n, norm(plain["grads"][n]), norm(hooked["grads"][n])) for n in names)
    code = script(SmallCNN, synthetic_images, build, edit_grad, surgery_pass, imports=HOOK_IMPORTS,
                  settings={"BATCH": BATCH, "CLASSES": CLASSES, "channels": channels, "image_size": image_size,
                            "pattern": pattern, "seed": seed, "mode": mode, "value": value, "enabled": enabled},
                  run="""
hooked = surgery_pass(channels, image_size, pattern, seed, (mode, value) if enabled else None)
for name, _ in hooked["params"]:
    print(name, "grad norm", hooked["grads"][name].norm().item())""")
    return SurgeryResult(enabled, mode, value, norm(plain["tensor_grad"]), norm(hooked["tensor_grad"]),
                         float(plain["tensor_grad"].abs().max()), float(hooked["tensor_grad"].abs().max()),
                         rows, verified, code)


def edit_grad(mode: str, value: float, grad: torch.Tensor) -> torch.Tensor:
    """The surgery: scale the gradient, or clamp each entry to [-value, value]."""
    return grad * value if mode == "scale" else grad.clamp(-value, value)


def surgery_pass(channels, image_size, pattern, seed, edit):
    """One forward and backward; with `edit` = (mode, value), a tensor hook registered by a forward hook rewrites the
    gradient of the last conv block's output (the returned tensor replaces the gradient)."""
    model, x, target = build(channels, image_size, pattern, seed)
    caught = {}

    def on_grad(g):
        out = edit_grad(*edit, g) if edit else g
        caught["tensor_grad"] = out
        return out

    def attach(module, args, out):
        caught["out"] = out
        out.register_hook(on_grad)

    handle = model.features[-3].register_forward_hook(attach)
    F.cross_entropy(model(x), target).backward()
    handle.remove()
    params = list(model.named_parameters())
    return {"tensor_grad": caught["tensor_grad"], "grads": {n: p.grad.clone() for n, p in params},
            "params": params, "model": model, "x": x, "target": target}


def _verify_surgery(channels, image_size, pattern, seed, mode, value, hooked) -> bool:
    """Recompute, without hooks: the gradient at the tensor, edited by hand, pushed back with autograd.grad."""
    model, x, target = build(channels, image_size, pattern, seed)
    last_conv = model.features[-3]
    caught = {}
    handle = last_conv.register_forward_hook(lambda m, a, out: caught.__setitem__("out", out))
    loss = F.cross_entropy(model(x), target)
    handle.remove()
    before = [p for n, p in model.named_parameters() if _is_before(n, model)]
    after = [p for n, p in model.named_parameters() if not _is_before(n, model)]
    g = torch.autograd.grad(loss, caught["out"], retain_graph=True)[0]
    upstream = torch.autograd.grad(caught["out"], before, grad_outputs=edit_grad(mode, value, g), retain_graph=True)
    downstream = torch.autograd.grad(loss, after)
    names = [n for n, _ in model.named_parameters()]
    expected = dict(zip([n for n in names if _is_before(n, model)], upstream, strict=True))
    expected.update(zip([n for n in names if not _is_before(n, model)], downstream, strict=True))
    return all(torch.allclose(hooked["grads"][n], expected[n], rtol=1e-5, atol=1e-7) for n in names)


def _is_before(param_name: str, model: nn.Module) -> bool:
    """Whether a parameter sits in or before the last conv (the hooked tensor depends on it)."""
    convs = [n for n, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    return any(param_name.startswith(c + ".") for c in convs)


# ---- the trap: hooks that pile up -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PileUp:
    calls: int
    fires_trap: tuple[int, ...]  # times the hook ran during call i
    registered_trap: tuple[int, ...]  # hooks registered after call i
    fires_correct: tuple[int, ...]
    registered_correct: tuple[int, ...]
    code: Script


def predict_leaky(model: nn.Module, x: torch.Tensor, log: list) -> torch.Tensor:
    """The trap: registers a logging hook on every call and never removes it."""
    model.register_forward_hook(lambda m, args, out: log.append(out.shape))
    return model(x)


def predict_clean(model: nn.Module, x: torch.Tensor, log: list) -> torch.Tensor:
    """The fix: keep the handle and remove the hook when the call ends."""
    handle = model.register_forward_hook(lambda m, args, out: log.append(out.shape))
    try:
        return model(x)
    finally:
        handle.remove()


def call_repeatedly(predict, calls: int):
    """Call predict `calls` times on one model: how often the logging hook fired in each call, and how many forward
    hooks the model held after it."""
    torch.manual_seed(0)
    model, x = nn.Linear(4, 2), torch.randn(1, 4)
    fires, registered, log = [], [], []  # log: e.g. collected features
    for _ in range(calls):
        before = len(log)
        with torch.no_grad():
            predict(model, x, log)
        fires.append(len(log) - before)
        registered.append(len(model._forward_hooks))
    return tuple(fires), tuple(registered)


@entry(3)
def hook_pileup(calls: int = 5) -> PileUp:
    """Call each predict function `calls` times; count hook firings per call and hooks left registered."""
    if not 1 <= calls <= MAX_CALLS:
        raise InputError(f"Calls must be between 1 and {MAX_CALLS}; got {calls}.")
    result = {name: call_repeatedly(predict, calls) for name, predict in (("trap", predict_leaky),
                                                                          ("correct", predict_clean))}
    code = script(predict_leaky, predict_clean, call_repeatedly, imports=MODULE_IMPORTS, settings={"calls": calls},
                  run="""
for predict in (predict_leaky, predict_clean):
    fires, registered = call_repeatedly(predict, calls)
    print(predict.__name__, "hook firings per call:", fires, "hooks registered after each:", registered)""")
    return PileUp(calls, *result["trap"], *result["correct"], code)
