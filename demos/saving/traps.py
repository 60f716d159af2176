"""Saving traps, each run beside its correct form: load_state_dict(strict=False), state_dict() holding references."""

import copy

import torch
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

from demos.shown import entry
from demos.traps import TrapPair, measure

# ---- strict=False loads nothing when every key has a prefix -------------------------------------------------------


def load_prefixed_non_strict():
    torch.manual_seed(0)
    trained = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    saved = {"module." + k: v for k, v in trained.state_dict().items()}  # what a DDP-wrapped model saves
    fresh = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    result = fresh.load_state_dict(saved, strict=False)  # no error, whatever matched or not
    return {"keys loaded": len(fresh.state_dict()) - len(result.missing_keys),
            "missing_keys": result.missing_keys, "unexpected_keys": result.unexpected_keys,
            "max |fresh - trained|": round(max((a - b).abs().max().item() for a, b in zip(
                fresh.state_dict().values(), trained.state_dict().values(), strict=True)), 4)}


def load_prefix_stripped_strict():
    torch.manual_seed(0)
    trained = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    saved = {"module." + k: v for k, v in trained.state_dict().items()}
    fresh = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    try:
        fresh.load_state_dict(saved)  # strict=True: names the keys that do not match
        strict_error = None
    except RuntimeError as err:
        strict_error = str(err).splitlines()[1].strip().split(", ")[0] + ", ..."
    consume_prefix_in_state_dict_if_present(saved, "module.")  # strip the wrapper's prefix, in place
    result = fresh.load_state_dict(saved)
    return {"strict=True on the prefixed file": strict_error, "missing_keys": result.missing_keys,
            "unexpected_keys": result.unexpected_keys,
            "max |fresh - trained|": round(max((a - b).abs().max().item() for a, b in zip(
                fresh.state_dict().values(), trained.state_dict().values(), strict=True)), 4)}


def _strict_sentence(trap: dict, correct: dict) -> str:
    missing, unexpected = trap["missing_keys"], trap["unexpected_keys"]
    return (f"`strict=False` returned without an error having loaded {trap['keys loaded']} keys: {len(missing)} "
            f"missing (`{missing[0]}`, …) and {len(unexpected)} unexpected (`{unexpected[0]}`, …), so the model "
            f"kept its random weights, up to {trap['max |fresh - trained|']:.4g} away from the trained ones. "
            f"`strict=True` refused the same file (`{correct['strict=True on the prefixed file']}`); with the "
            f"`module.` prefix stripped it loaded with {len(correct['missing_keys'])} missing and "
            f"{len(correct['unexpected_keys'])} unexpected keys, max difference {correct['max |fresh - trained|']:g}. "
            "Read what `load_state_dict` returns whenever you pass `strict=False`.")


@entry()
def strict_false() -> TrapPair:
    """A DDP-style 'module.' file loaded with strict=False, and with the prefix stripped and strict=True."""
    return measure("strict", "`load_state_dict(strict=False)` and its missing/unexpected keys",
                   ("Trap: `load_state_dict(sd, strict=False)`", "Correct: strip the prefix, keep strict=True"),
                   (load_prefixed_non_strict, load_prefix_stripped_strict), _strict_sentence,
                   imports="import torch\nfrom torch import nn\n"
                           "from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present")


# ---- state_dict() returns references: the "best weights" bug -----------------------------------------------------


def train_keeping_best(snapshot):
    """30 SGD steps on an overfitting problem, keeping snapshot(model.state_dict()) at each new best val loss."""
    torch.manual_seed(2)
    w_true = torch.randn(8, 1)
    x, x_val = torch.randn(10, 8), torch.randn(64, 8)  # 10 training points for 9 parameters: it overfits
    y, y_val = x @ w_true + torch.randn(10, 1), x_val @ w_true + torch.randn(64, 1)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    val_losses, best, best_step = [], None, None
    for step in range(30):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        with torch.no_grad():
            val_losses.append(round(nn.functional.mse_loss(model(x_val), y_val).item(), 4))
        if val_losses[-1] == min(val_losses):
            best, best_step = snapshot(model.state_dict()), step
    model.load_state_dict(best)
    with torch.no_grad():
        restored = nn.functional.mse_loss(model(x_val), y_val).item()
    return {"best step": best_step, "best val loss": min(val_losses), "last val loss": val_losses[-1],
            "val loss after restoring the best": round(restored, 4),
            "best['weight'] is the live weight": best["weight"].data_ptr() == model.weight.data_ptr()}


def keep_best_by_reference():
    return train_keeping_best(lambda state: state)  # tensors that share memory with the parameters


def keep_best_by_copy():
    return train_keeping_best(copy.deepcopy)  # a snapshot in its own memory


def _best_sentence(trap: dict, correct: dict) -> str:
    shared = trap["best['weight'] is the live weight"]
    return (f"Validation loss was lowest at step {trap['best step']} ({trap['best val loss']:.4g}) and ended at "
            f"{trap['last val loss']:.4g}. Restoring the `state_dict()` kept as \"best\" gave "
            f"{trap['val loss after restoring the best']:.4g}: the last weights, since its tensors are the live "
            f"parameters (same memory: {shared}). Restoring a `copy.deepcopy` of it gave "
            f"{correct['val loss after restoring the best']:.4g}, the best step's loss.")


@entry()
def best_weights() -> TrapPair:
    """Early stopping's 'best weights' kept by reference and by deep copy; restore each, measure validation loss."""
    return measure("best", "`state_dict()` returns references: the \"best weights\" bug",
                   ("Trap: `best = model.state_dict()`", "Correct: `best = copy.deepcopy(model.state_dict())`"),
                   (keep_best_by_reference, keep_best_by_copy), _best_sentence,
                   imports="import copy\n\nimport torch\nfrom torch import nn", helpers=(train_keeping_best,))
