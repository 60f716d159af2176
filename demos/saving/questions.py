"""Predict-then-run questions for the saving & deployment page."""

import torch
from torch import nn

from demos.quiz import Question
from demos.saving.state import Wrapped

NN = "import torch\nfrom torch import nn"


def _traced_negative():
    import warnings

    class Branchy(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return -x

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(Branchy(), torch.ones(3))
    x = -torch.ones(3)
    return torch.equal(traced(x), Branchy()(x))


def _nonpersistent_in_state_dict():
    m = nn.Module()
    m.register_buffer("mask", torch.ones(3), persistent=False)
    return "mask" in m.state_dict()


def _batchnorm_keys():
    return len(nn.BatchNorm1d(4).state_dict())


def _strict_false_missing():
    old = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    new = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 2))
    result = new.load_state_dict(old.state_dict(), strict=False)
    return len(result.missing_keys)


def _adam_state_keys():
    p = nn.Parameter(torch.ones(2))
    opt = torch.optim.Adam([p])
    p.sum().backward()
    opt.step()
    return sorted(opt.state_dict()["state"][0])


def _dataparallel_prefix():
    """nn.DataParallel's keys, from a wrapper that holds the model as `self.module` as it does: DataParallel itself
    would initialise CUDA in the server and move the model to cuda:0 where there is a GPU."""
    return next(iter(Wrapped(nn.Linear(2, 2)).state_dict()))


def _weights_only_custom():
    import argparse
    import io

    buf = io.BytesIO()
    torch.save({"args": argparse.Namespace(lr=0.1)}, buf)
    buf.seek(0)
    try:
        torch.load(buf)
        outcome = "loaded"
    except Exception as err:
        outcome = type(err).__name__
    return outcome


def _state_dict_shares_storage():
    lin = nn.Linear(2, 2)
    lin.state_dict()["weight"].zero_()
    return bool((lin.weight == 0).all())


def _int8_ratio():
    w = torch.randn(256, 256)
    q = torch.clamp(torch.round(w / (w.abs().max() / 127)), -128, 127).to(torch.int8)
    return (w.numel() * w.element_size()) / (q.numel() * q.element_size())


def _save_size_ratio():
    import io

    full = torch.randn(1000, 1000)
    buf = io.BytesIO()
    torch.save(full[:10], buf)  # a view of 10 rows
    return round(buf.tell() / (1000 * 1000 * 4), 1)


def _strict_false_missing():
    lin = nn.Linear(3, 2)
    saved = {"module." + k: v for k, v in nn.Linear(3, 2).state_dict().items()}  # a DDP checkpoint
    return len(lin.load_state_dict(saved, strict=False).missing_keys)


QUESTIONS = (
    Question("trace_negative", "A model traced on torch.ones(3): is its output on -torch.ones(3) correct?",
             _traced_negative,
             "No. Tracing records the ops that ran for the example; the Python `if` was evaluated once (a "
             "TracerWarning says so) and the trace always takes the positive branch. `torch.jit.script` or "
             "`torch.export` with `torch.cond` keep both branches.",
             choices=("True", "False"), imports=NN),
    Question("nonpersistent", "Is a buffer registered with persistent=False in the state_dict?",
             _nonpersistent_in_state_dict,
             "No. Non-persistent buffers move with `.to()` and live on the module, but are not saved: use them "
             "for things you can recompute (masks, rotary tables).", choices=("True", "False"), imports=NN),
    Question("bn_keys", "How many entries does BatchNorm1d(4).state_dict() hold?", _batchnorm_keys,
             "Five: weight and bias (parameters), running_mean, running_var and num_batches_tracked (buffers).",
             kind="number", imports=NN),
    Question("strict_false", "Loading a 2-layer Sequential's state_dict into a 3-layer one with strict=False: "
             "how many missing keys are reported?", _strict_false_missing,
             "Two: the third layer's weight and bias. strict=False does not fail; it returns what did not match, "
             "and those parameters keep their fresh initialisation: check the report.", kind="number", imports=NN),
    Question("adam_keys", "After one Adam step, which keys does the optimizer state hold for a parameter?",
             _adam_state_keys,
             "`step`, `exp_avg` (first moment) and `exp_avg_sq` (second moment): two tensors the size of the "
             "parameter, which is why Adam checkpoints are about 3x the weights.",
             choices=("['exp_avg', 'exp_avg_sq', 'step']", "['momentum_buffer']", "['exp_avg', 'step']"),
             imports=NN),
    Question("dp_prefix", "What is the first key of nn.DataParallel(nn.Linear(2, 2)).state_dict()?",
             _dataparallel_prefix,
             "`module.weight`: the wrapper holds the model as `self.module`. DDP does the same. Save "
             "`model.module.state_dict()`, or strip the prefix with `consume_prefix_in_state_dict_if_present`.",
             choices=("weight", "module.weight", "0.weight"),
             imports=NN + "\nfrom demos.saving.state import Wrapped  # self.module, as in DataParallel"),
    Question("weights_only", "A checkpoint holds the training argparse.Namespace. What does torch.load (default "
             "settings) do?",
             _weights_only_custom,
             "`weights_only=True` is the default: only tensors, primitive containers and allow-listed classes are "
             "unpickled, so arbitrary code in a downloaded checkpoint cannot run. Allow a class you trust with "
             "`torch.serialization.add_safe_globals` or the `safe_globals` context manager.",
             choices=("loaded", "UnpicklingError", "TypeError")),
    Question("sd_shares", "Zeroing a tensor from lin.state_dict() in place: does lin.weight change?",
             _state_dict_shares_storage,
             "Yes. state_dict() returns detached tensors that share storage with the parameters; deep-copy it "
             "(`copy.deepcopy` or `{k: v.clone()}`) to keep a snapshot.", choices=("True", "False"), imports=NN),
    Question("int8_ratio", "A float32 weight stored as int8: how many times fewer bytes?", _int8_ratio,
             "Four, for the weights alone; files shrink a little less because of scales, zero points, biases and "
             "metadata.", kind="number"),
    Question("view_save", "torch.save of a 10-row view of a 1000x1000 float32 tensor writes about what fraction "
             "of the full tensor's bytes?", _save_size_ratio,
             "The whole storage (1.0): torch.save keeps views sharing storage, so it writes the base. "
             "`.clone()` the slice before saving it.", kind="number"),
    Question("strict_false", "A DDP checkpoint (keys start with 'module.') is loaded into a bare Linear with "
             "strict=False. How many missing keys does load_state_dict report?", _strict_false_missing,
             "2 (weight and bias), and 2 unexpected ones: nothing loaded, and no error. Strip the prefix "
             "(consume_prefix_in_state_dict_if_present) or read the returned keys.", kind="number", imports=NN),
)
