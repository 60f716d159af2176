"""Training-loop traps, each run beside its correct form: clipping gradients a GradScaler has not unscaled yet."""

import torch
from torch import nn

from demos.shown import entry
from demos.traps import TrapPair, measure

# ---- clip_grad_norm_ before scaler.unscale_ ------------------------------------------------------------------------


def clip_before_unscale():
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    x, y = torch.randn(32, 4), 10 * torch.randn(32, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)  # CPU here; "cuda" behaves the same
    before = [p.detach().clone() for p in model.parameters()]
    scaler.scale(nn.functional.mse_loss(model(x), y)).backward()
    norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # measures the *scaled* gradients
    scaler.step(opt)  # now unscales: divides the already-clipped gradients by the scale
    scaler.update()
    moved = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before, strict=True)]).norm()
    return {"scale": scaler.get_scale(), "norm clip_grad_norm_ saw": round(norm.item(), 1),
            "parameters moved (norm)": float(f"{moved.item():.6g}")}


def clip_after_unscale():
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    x, y = torch.randn(32, 4), 10 * torch.randn(32, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    before = [p.detach().clone() for p in model.parameters()]
    scaler.scale(nn.functional.mse_loss(model(x), y)).backward()
    scaler.unscale_(opt)  # .grad now holds the true gradients; step() will not unscale again
    norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    scaler.step(opt)
    scaler.update()
    moved = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before, strict=True)]).norm()
    return {"scale": scaler.get_scale(), "norm clip_grad_norm_ saw": round(norm.item(), 4),
            "parameters moved (norm)": float(f"{moved.item():.6g}")}


def _clip_sentence(trap: dict, correct: dict) -> str:
    scale, moved, right = trap["scale"], trap["parameters moved (norm)"], correct["parameters moved (norm)"]
    return (f"Before `unscale_`, `clip_grad_norm_` measured {trap['norm clip_grad_norm_ saw']:,.1f}: the true norm "
            f"{correct['norm clip_grad_norm_ saw']:.4g} times the scale {scale:,.0f}. It clipped that to 1, and "
            f"`scaler.step` then unscaled those clipped gradients (divided them by the scale), so the parameters moved "
            f"{moved:.4g} instead of {right:.4g}, the correct step divided by the scale ({right / scale:.4g}), with "
            "no warning. After `scaler.unscale_(opt)` the clip saw the true norm and the step had the length clipping "
            "asked for (learning rate × max_norm).")


@entry()
def clip_before_unscale_trap() -> TrapPair:
    """One scaled SGD step with clip_grad_norm_(max_norm=1) before and after scaler.unscale_."""
    return measure("unscale", "Clipping before `scaler.unscale_`",
                   ("Trap: clip, then `scaler.step`", "Correct: `scaler.unscale_(opt)`, clip, `scaler.step`"),
                   (clip_before_unscale, clip_after_unscale), _clip_sentence,
                   imports="import torch\nfrom torch import nn")
