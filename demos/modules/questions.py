"""Predict-then-run questions for the Modules & hooks page; each answer is what torch returns."""

import torch
import torch.nn as nn

from demos.quiz import Question

NN = "import torch\nimport torch.nn as nn"


def _non_persistent_in_state_dict():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.register_buffer("mask", torch.ones(2))
            self.register_buffer("cache", torch.zeros(2), persistent=False)

    return len(Net().state_dict())


def _tied_param_count():
    emb = nn.Embedding(10, 4)
    out = nn.Linear(4, 10, bias=False)
    out.weight = emb.weight
    model = nn.ModuleDict({"emb": emb, "out": out})
    return sum(p.numel() for p in model.parameters())


def _eval_still_grads():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.Linear(3, 1))
    model.eval()
    model(torch.randn(4, 3)).sum().backward()
    return model[0].weight.grad is not None


def _forward_hook_args_type():
    seen = []
    layer = nn.Linear(2, 2)
    layer.register_forward_hook(lambda module, args, output: seen.append(type(args).__name__))
    layer(torch.ones(1, 2))
    return seen[0]


def _plain_list_params():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Linear(4, 4) for _ in range(3)]
            self.head = nn.Linear(4, 1)

    return len(list(Net().parameters()))


def _module_list_call():
    layers = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    try:
        layers(torch.ones(1, 2))
        outcome = "it runs"
    except Exception as err:
        outcome = type(err).__name__
    return outcome


def _pile_up_fires():
    layer = nn.Linear(2, 2)
    log = []
    for _ in range(3):
        layer.register_forward_hook(lambda m, a, out: log.append(1))
        layer(torch.ones(1, 2))
    return len(log)


def _tied_grad():
    w = nn.Parameter(torch.tensor([[2.0]]))
    x = torch.tensor([3.0])
    h = w[0] * x  # first use: the embedding
    y = (h * w[0]).sum()  # second use: the output projection
    y.backward()
    return w.grad.item()


def _bn_batches_tracked():
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(2)
    for _ in range(3):
        bn(torch.randn(4, 2))
    bn.eval()
    for _ in range(2):
        bn(torch.randn(4, 2))
    return int(bn.num_batches_tracked)


def _frozen_grad():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    model[0].requires_grad_(False)
    model(torch.randn(3, 2)).sum().backward()
    return "None" if model[0].weight.grad is None else "zeros"


def _tensor_hook_scale():
    x = torch.tensor(3.0, requires_grad=True)
    h = x * x
    h.register_hook(lambda g: g * 10)
    h.backward()
    return x.grad.item()


def _sequential_slice():
    seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
    return type(seq[1:]).__name__


def _old_backward_hook_shape():
    import warnings

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x) * 2

    block, seen = Block(), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that this hook misses grad_input
        block.register_backward_hook(lambda m, grad_in, grad_out: seen.append(grad_in[0].shape))
        block(torch.randn(1, 3, requires_grad=True)).sum().backward()
    return seen[0]


def _bn_running_var():
    bn = nn.BatchNorm1d(1, momentum=1.0)  # the running statistics become this batch's
    bn(torch.tensor([[1.0], [3.0]]))
    return bn.running_var.item()


QUESTIONS = (
    Question("sd_len", "How many entries does this model's state_dict() have?", _non_persistent_in_state_dict,
             "fc.weight, fc.bias and the persistent buffer `mask`: 3. A buffer registered with persistent=False "
             "moves with `.to()` but is left out of the state_dict.", kind="number", imports=NN),
    Question("tied_count", "After tying, how many numbers does parameters() count?", _tied_param_count,
             "The embedding (10 × 4) and the projection share one Parameter; parameters() yields each Parameter "
             "once, so 40, not 80.", kind="number", imports=NN),
    Question("eval_grads", "After model.eval() and backward(), does the first layer have a .grad?", _eval_still_grads,
             "eval() only flips `training` (dropout off, BatchNorm uses running stats). Autograd still records the "
             "graph and fills .grad: use requires_grad_(False) or torch.no_grad() to stop gradients.",
             choices=("True", "False"), imports=NN),
    Question("hook_args", "What type is the `args` a forward hook receives?", _forward_hook_args_type,
             "Forward hooks get the module, the positional inputs packed as a tuple (even for one tensor), and the "
             "output. Keyword arguments only arrive with `with_kwargs=True`.",
             choices=("Tensor", "tuple", "list", "dict"), imports=NN),
    Question("plain_list", "How many parameter tensors does parameters() yield?", _plain_list_params,
             "Only the head's weight and bias: 2. Layers in a plain Python list are never registered, so they are "
             "invisible to parameters(), state_dict(), .to() and the optimizer. Use nn.ModuleList.",
             kind="number", imports=NN),
    Question("modulelist_call", "What happens when you call an nn.ModuleList on a tensor?", _module_list_call,
             "ModuleList has no forward: it only registers its layers. Calling it raises NotImplementedError; "
             "iterate over it yourself, or use nn.Sequential for a composed forward.",
             choices=("it runs", "TypeError", "NotImplementedError", "RuntimeError"), imports=NN),
    Question("pile_up", "The hook is registered inside the loop. How many entries does `log` have?", _pile_up_fires,
             "Each call adds a hook and none is removed: call 1 fires 1 hook, call 2 fires 2, call 3 fires 3, "
             "so 6. Keep the handle and call handle.remove().", kind="number", imports=NN),
    Question("tied_grad", "w is used twice (y = w·x·w). What is w.grad?", _tied_grad,
             "A shared parameter's gradient is the sum over its uses: dy/dw = x·w + w·x = 6 + 6 = 12.",
             kind="number", imports=NN),
    Question("bn_tracked", "After 3 forwards in train() and 2 in eval(), what is num_batches_tracked?",
             _bn_batches_tracked,
             "Only train() forwards update running statistics and the counter; eval() reads them: 3.",
             kind="number", imports=NN),
    Question("frozen_grad", "What is the frozen layer's .grad after backward?", _frozen_grad,
             "A tensor with requires_grad=False is not a leaf autograd accumulates into, so .grad stays None; "
             "optimizers skip parameters whose .grad is None.", choices=("None", "zeros"), imports=NN),
    Question("tensor_hook", "A tensor hook multiplies h's gradient by 10 (h = x², x = 3). What is x.grad?",
             _tensor_hook_scale,
             "The hook's return value replaces the gradient flowing into h's graph: 10 · 2x = 60.",
             kind="number", imports=NN),
    Question("seq_slice", "What type is seq[1:]?", _sequential_slice,
             "Slicing a Sequential returns a new Sequential over the same layer objects, runnable on its own.",
             choices=("list", "tuple", "Sequential", "ModuleList"), imports=NN),
    Question("old_hook", "forward returns self.fc(x) * 2 with fc = Linear(3, 2) and x of shape (1, 3). What shape "
             "is grad_input[0] in a register_backward_hook (not the full one)?", _old_backward_hook_shape,
             "(1, 2): the old hook attaches to the last operation in forward, the * 2, so grad_input is the "
             "gradient of fc's output. register_full_backward_hook gives the module's input gradient, (1, 3).",
             kind="shape", imports=NN),
    Question("bn_var", "BatchNorm1d(1, momentum=1.0) in train() sees the batch [1, 3]. What is running_var?",
             _bn_running_var,
             "2.0: running_var stores the unbiased variance (divide by N − 1 = 1), while the train-mode forward "
             "normalized with the biased one (divide by N = 2), 1.0.", kind="number", imports=NN),
)
