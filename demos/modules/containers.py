"""Containers: a plain list vs nn.ModuleList, ModuleDict, Sequential vs ModuleList, ParameterList, the module tree."""

import copy
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from demos.errors import InputError
from demos.modules.common import MODULE_IMPORTS, norm, target_device
from demos.modules.inputs import parse_head_names
from demos.shown import Script, entry, script

MAX_LAYERS, MIN_WIDTH, MAX_WIDTH = 8, 2, 64


class ListNet(nn.Module):
    """A stack of Linear layers kept in an nn.ModuleList (registered) or a plain list (invisible), then a head."""

    def __init__(self, n_layers=3, width=8, registered=True):
        super().__init__()
        layers = [nn.Linear(width, width) for _ in range(n_layers)]
        self.layers = nn.ModuleList(layers) if registered else layers
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)


def validate(n_layers: int, width: int) -> None:
    if not 1 <= n_layers <= MAX_LAYERS:
        raise InputError(f"Layers must be between 1 and {MAX_LAYERS}; got {n_layers}.")
    if not MIN_WIDTH <= width <= MAX_WIDTH:
        raise InputError(f"Width must be between {MIN_WIDTH} and {MAX_WIDTH}; got {width}.")


@dataclass(frozen=True)
class ListVsModuleList:
    rows: tuple[tuple[str, str, str], ...]  # property, plain list, nn.ModuleList
    param_tensors: tuple[int, int]
    numel: tuple[int, int]
    first_layer_change: tuple[float, float]
    code: Script


def list_facts(registered: bool, n_layers: int, width: int, seed: int, device: str) -> dict:
    """ListNet with its layers in a plain list or an nn.ModuleList: what parameters(), state_dict(), modules() and
    .to(device) see, and what one SGD step does to the first layer."""
    torch.manual_seed(seed)
    model = ListNet(n_layers, width, registered)
    params = list(model.parameters())
    moved = copy.deepcopy(model).to(device)
    try:
        moved(torch.ones(2, width, device=device))
        forward_after_to = "works"
    except RuntimeError as err:
        forward_after_to = f"RuntimeError: {str(err).splitlines()[0]}"
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.layers[0].weight.detach().clone()
    g = torch.Generator().manual_seed(seed + 1)
    x, y = torch.randn(16, width, generator=g), torch.randn(16, 1, generator=g)
    F.mse_loss(model(x), y).backward()
    opt.step()
    return dict(
        tensors=len(params), numel=sum(p.numel() for p in params), keys=len(model.state_dict()),
        modules=len(list(model.modules())), device=str(moved.layers[0].weight.device),
        forward_after_to=forward_after_to, grad=model.layers[0].weight.grad is not None,
        change=norm(model.layers[0].weight.detach() - before),
    )


@entry(2, 4)
def list_vs_modulelist(n_layers: int = 3, width: int = 8, seed: int = 0) -> ListVsModuleList:
    """The same layers in a plain list and in nn.ModuleList: counts, .to(), state_dict, a real training step."""
    validate(n_layers, width)
    device = target_device()
    plain, good = (list_facts(r, n_layers, width, seed, device) for r in (False, True))
    labels = (("tensors in parameters()", "tensors"), ("numbers in parameters()", "numel"),
              ("keys in state_dict()", "keys"), ("modules in modules()", "modules"),
              (f"layers[0].weight device after .to('{device}')", "device"),
              (f"forward after .to('{device}')", "forward_after_to"),
              ("layers[0].weight.grad set by backward", "grad"),
              ("|change| of layers[0].weight after opt.step()", "change"))
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    rows = tuple((label, fmt(plain[k]), fmt(good[k])) for label, k in labels)
    code = script(norm, ListNet, list_facts, imports=MODULE_IMPORTS,
                  settings={"n_layers": n_layers, "width": width, "seed": seed, "device": device}, run="""
for registered in (False, True):
    print("ModuleList" if registered else "plain list", list_facts(registered, n_layers, width, seed, device))""")
    return ListVsModuleList(rows, (plain["tensors"], good["tensors"]), (plain["numel"], good["numel"]),
                            (plain["change"], good["change"]), code)


class MultiHead(nn.Module):
    """A shared trunk and one head per task, looked up by name in an nn.ModuleDict."""

    def __init__(self, heads=("cls", "box"), width=8):
        super().__init__()
        self.trunk = nn.Linear(width, width)
        self.heads = nn.ModuleDict({name: nn.Linear(width, i + 1) for i, name in enumerate(heads)})

    def forward(self, x, head):
        return self.heads[head](torch.relu(self.trunk(x)))


@dataclass(frozen=True)
class ModuleDictView:
    heads: tuple[str, ...]
    rows: tuple[tuple[str, str, str, int], ...]  # head, state_dict keys, output shape, parameters
    total_params: int
    code: Script


@entry("a, b")
def module_dict_demo(heads_text: str = "cls, box", width: int = 8, seed: int = 0) -> ModuleDictView:
    """Heads picked by name: each one's state_dict keys, output shape and parameter count."""
    heads = parse_head_names(heads_text)
    validate(1, width)
    rows, total = head_rows(heads, width, seed)
    code = script(MultiHead, head_rows, imports=MODULE_IMPORTS, settings={"heads": heads, "width": width, "seed": seed},
                  run="""
rows, total = head_rows(heads, width, seed)
for row in rows:
    print(row)
print("parameters:", total)""")
    return ModuleDictView(heads, tuple(rows), total, code)


def head_rows(heads, width: int, seed: int):
    """Per head of a MultiHead: its state_dict keys, its output's shape and its parameter count; then the total."""
    torch.manual_seed(seed)
    model = MultiHead(heads, width)
    x = torch.randn(4, width)
    keys = list(model.state_dict())
    rows = [(h, ", ".join(k for k in keys if k.startswith(f"heads.{h}.")), str(tuple(model(x, h).shape)),
             sum(p.numel() for p in model.heads[h].parameters())) for h in heads]
    return rows, sum(p.numel() for p in model.parameters())


def mlp_layers(n_layers: int, width: int) -> list[nn.Module]:
    """Linear, ReLU, Linear, ReLU, ... : the layers both containers get."""
    layers = []
    for _ in range(n_layers):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return layers


@dataclass(frozen=True)
class SequentialVsList:
    sequential_equals_loop: bool
    first_item: str
    slice_type: str
    slice_len: int
    modulelist_call: str
    modulelist_loop_equals: bool
    parameterlist_count: int
    plain_parameter_list_count: int
    code: Script


@entry()
def sequential_vs_modulelist(n_layers: int = 3, width: int = 8, seed: int = 0) -> SequentialVsList:
    """Sequential composes a forward (and slices to Sequential); ModuleList only holds layers; ParameterList."""
    validate(n_layers, width)
    code = script(mlp_layers, sequential_facts, imports=MODULE_IMPORTS,
                  settings={"n_layers": n_layers, "width": width, "seed": seed},
                  run="print(sequential_facts(n_layers, width, seed))")
    return SequentialVsList(*sequential_facts(n_layers, width, seed), code)


def sequential_facts(n_layers: int, width: int, seed: int):
    """The same layers in nn.Sequential and nn.ModuleList: whether seq(x) equals the layers applied in order, what
    indexing and slicing return, what calling the ModuleList does, whether looping over it equals seq, and how many
    parameters an nn.ParameterList registers against a plain list."""
    torch.manual_seed(seed)
    layers = mlp_layers(n_layers, width)
    seq, mlist = nn.Sequential(*layers), nn.ModuleList(layers)
    x = torch.randn(4, width)
    manual = x
    for layer in layers:
        manual = layer(manual)
    try:
        mlist(x)
        call = "works"
    except NotImplementedError as err:
        call = f"NotImplementedError: {err}"
    looped = x
    for layer in mlist:
        looped = layer(looped)

    class Scales(nn.Module):
        def __init__(self, registered):
            super().__init__()
            params = [nn.Parameter(torch.ones(width)) for _ in range(n_layers)]
            self.scales = nn.ParameterList(params) if registered else params

    with torch.no_grad():
        return (torch.equal(seq(x), manual), repr(seq[0]), type(seq[1:]).__name__, len(seq[1:]), call,
                torch.equal(looped, manual), len(list(Scales(True).parameters())),
                len(list(Scales(False).parameters())))


class Zoo(nn.Module):
    """One of each container, and one layer hidden in a plain list."""

    def __init__(self, n_blocks=2, width=8, heads=("cls", "box")):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(width, width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Linear(width, width) for _ in range(n_blocks)])
        self.heads = nn.ModuleDict({name: nn.Linear(width, 2) for name in heads})
        self.scales = nn.ParameterList([nn.Parameter(torch.ones(width)) for _ in range(n_blocks)])
        self.forgotten = [nn.Linear(width, width)]  # a plain list: invisible to named_modules()


@dataclass(frozen=True)
class TreeNode:
    name: str  # dotted path; "" is the root
    parent: str | None
    label: str  # class name or "Parameter"
    params: int  # numbers owned directly (recurse=False)
    kind: str  # container, layer, parameter, unregistered


@dataclass(frozen=True)
class ModuleTree:
    nodes: tuple[TreeNode, ...]
    named_modules: tuple[str, ...]
    code: Script


def is_container(m: nn.Module) -> bool:
    """A container class, or any module with children."""
    return isinstance(m, (nn.Sequential, nn.ModuleList, nn.ModuleDict, nn.ParameterList)) or bool(list(m.children()))


@entry()
def module_tree(n_blocks: int = 2, width: int = 8, heads_text: str = "cls, box") -> ModuleTree:
    """The tree named_modules() walks, plus ParameterList entries and the layers it cannot see."""
    validate(n_blocks, width)
    heads = parse_head_names(heads_text)
    nodes, names = tree_nodes(n_blocks, width, heads)
    code = script(Zoo, is_container, tree_nodes, imports=MODULE_IMPORTS,
                  settings={"n_blocks": n_blocks, "width": width, "heads": heads}, run="""
nodes, names = tree_nodes(n_blocks, width, heads)
for node in nodes:
    print(node)  # name, parent, class, numbers owned directly, kind
print("named_modules():", names)  # a plain list's layers are not there""")
    return ModuleTree(tuple(TreeNode(*node) for node in nodes), tuple(names), code)


def tree_nodes(n_blocks: int, width: int, heads):
    """The tree named_modules() walks, plus ParameterList entries and the layers in plain lists it cannot see:
    (name, parent, class, numbers owned directly, kind) per node; and named_modules()'s names."""
    torch.manual_seed(0)
    model = Zoo(n_blocks, width, heads)
    nodes, hidden = [], []
    for name, m in model.named_modules():
        parent = name.rpartition(".")[0] if name else None
        own = sum(p.numel() for p in m.parameters(recurse=False))
        nodes.append((name, parent, type(m).__name__, own, "container" if is_container(m) else "layer"))
        if isinstance(m, nn.ParameterList):
            nodes += [(f"{name}.{k}", name, "Parameter", p.numel(), "parameter")
                      for k, p in m.named_parameters(recurse=False)]
        for attr, value in vars(m).items():
            if isinstance(value, (list, tuple)) and any(isinstance(v, nn.Module) for v in value):
                path = f"{name}.{attr}" if name else attr
                hidden.append((path, name, "plain list", 0, "unregistered"))
                hidden += [(f"{path}[{i}]", path, type(v).__name__, sum(p.numel() for p in v.parameters()),
                            "unregistered") for i, v in enumerate(value)]
    return nodes + hidden, [n for n, _ in model.named_modules()]
