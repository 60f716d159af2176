"""Indexing and shape traps, each run beside its correct form: advanced indexing copies, squeeze() eats a batch of 1."""

import torch

from demos.shown import entry
from demos.traps import TrapPair, fmt_list, measure

# ---- advanced indexing returns a copy ----------------------------------------------------------------------------


def write_through_index_tensor():
    x = torch.zeros(5)
    idx = torch.tensor([1, 3])
    picked = x[idx]  # advanced (tensor) indexing: a new tensor
    x[idx][0] = 5  # writes into that new tensor, which is then dropped
    return {"x": x.tolist(), "x[idx] shares x's memory": picked.untyped_storage().data_ptr() == x.data_ptr()}


def write_through_assignment():
    x = torch.zeros(5)
    idx = torch.tensor([1, 3])
    x[idx[0]] = 5  # one indexing call on the left of '=' is __setitem__: it writes into x
    sliced = x[1:4]  # basic slicing: a view
    sliced[2] = 7  # writes x[3]
    return {"x": x.tolist(), "x[1:4] shares x's memory": sliced.untyped_storage().data_ptr() == x.data_ptr()}


def _index_sentence(trap: dict, correct: dict) -> str:
    copy_shares, view_shares = trap["x[idx] shares x's memory"], correct["x[1:4] shares x's memory"]
    return (f"`x[idx][0] = 5` left x at {fmt_list(trap['x'])} without a word: `x[idx]` with an index tensor is a "
            f"copy (shares x's memory: {copy_shares}), and the write went into it. `x[idx[0]] = 5` is one "
            f"`__setitem__` on x, and a basic slice is a view (shares x's memory: {view_shares}), so x became "
            f"{fmt_list(correct['x'])}.")


@entry()
def advanced_indexing() -> TrapPair:
    """Chained indexing through an index tensor writes into a copy; assignment and slices write into x."""
    return measure("index", "Advanced indexing returns a copy", ("Trap: `x[idx][0] = 5`", "Correct: `x[idx[0]] = 5`"),
                   (write_through_index_tensor, write_through_assignment), _index_sentence)


# ---- squeeze() drops a batch dimension of one ---------------------------------------------------------------------


def center_with_squeeze():
    torch.manual_seed(0)
    x = torch.randn(1, 1, 4)  # (batch, tokens, features): a batch of one sequence of one token
    h = x.squeeze()  # meant to drop the token dim; drops the batch dim too
    centered = h - h.mean(dim=0)  # "subtract the batch mean": now the mean over features
    return {"h.shape": list(h.shape), "max |centered|": round(centered.abs().max().item(), 4)}


def center_with_squeeze_dim():
    torch.manual_seed(0)
    x = torch.randn(1, 1, 4)
    h = x.squeeze(1)  # names the dim: the batch dim stays
    centered = h - h.mean(dim=0)  # one sample minus the batch mean: zeros
    return {"h.shape": list(h.shape), "max |centered|": round(centered.abs().max().item(), 4)}


def _squeeze_sentence(trap: dict, correct: dict) -> str:
    return (f"With a batch of one, `x.squeeze()` returned shape {tuple(trap['h.shape'])} instead of "
            f"{tuple(correct['h.shape'])}, so `mean(dim=0)` averaged the {trap['h.shape'][0]} features instead of "
            f"the batch: the centered values reach {trap['max |centered|']:.4g} where they should be "
            f"{correct['max |centered|']:g}, and nothing raised. `x.squeeze(1)` names the dim and keeps the batch.")


@entry()
def squeeze_batch_of_one() -> TrapPair:
    """Centering over the batch after squeeze() vs squeeze(1), for a batch of one."""
    return measure("squeeze", "`squeeze()` drops a batch of one",
                   ("Trap: `x.squeeze()`", "Correct: `x.squeeze(1)`"),
                   (center_with_squeeze, center_with_squeeze_dim), _squeeze_sentence)
