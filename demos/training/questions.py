"""Predict-then-run questions for the training-loop page; torch decides every answer."""

import torch
from torch import nn

from demos.quiz import Question

NN = "import torch\nfrom torch import nn"


def _no_zero_grad():
    w = torch.tensor(1.0, requires_grad=True)
    for _ in range(3):
        loss = 2 * w
        loss.backward()
    return w.grad


def _zero_grad_leaves():
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(1, 2)).sum().backward()
    opt.zero_grad()
    return model.weight.grad is None


def _onecycle_lr():
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=100)
    for _ in range(30):
        opt.step()
        sched.step()
    return round(opt.param_groups[0]["lr"], 6)


def _bce_at_100():
    x = torch.tensor([100.0])
    return nn.BCELoss()(torch.sigmoid(x), torch.tensor([0.0]))


def _bce_by_hand_at_100():
    p = torch.sigmoid(torch.tensor(100.0))
    return -torch.log(1 - p)


def _ce_on_probs_floor():
    logits = torch.tensor([[1000.0, -1000.0]])
    probs = logits.softmax(dim=1)
    return round(nn.CrossEntropyLoss()(probs, torch.tensor([0])).item(), 4)


def _label_smoothing():
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0]])
    return nn.CrossEntropyLoss(label_smoothing=0.2)(logits, torch.tensor([1]))


def _sum_vs_mean():
    torch.manual_seed(0)
    w = torch.ones(3, requires_grad=True)
    x = torch.randn(32, 3)
    (x @ w).pow(2).sum().backward()
    g_sum = w.grad.clone()
    w.grad = None
    (x @ w).pow(2).mean().backward()
    return round((g_sum / w.grad).mean().item(), 3)


def _scaler_backoff():
    p = nn.Parameter(torch.ones(1))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    loss = p.sum() * float("inf")
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return scaler.get_scale()


def _fp16_underflow():
    return torch.tensor(1e-8).to(torch.float16).item()


def _bf16_subnormal():
    return torch.tensor(1e-42).to(torch.bfloat16).item()  # float32 holds 1e-42 as a subnormal


def _steplr():
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.1)
    for _ in range(7):
        opt.step()
        sched.step()
    return round(opt.param_groups[0]["lr"], 6)


def _adam_vs_adamw():
    torch.manual_seed(0)
    a = nn.Parameter(torch.tensor([3.0, -2.0]))
    b = nn.Parameter(a.detach().clone())
    opt_a = torch.optim.Adam([a], lr=0.1, weight_decay=0.1)
    opt_b = torch.optim.AdamW([b], lr=0.1, weight_decay=0.1)
    for p, opt in ((a, opt_a), (b, opt_b)):
        for _ in range(5):
            opt.zero_grad()
            (p**2).sum().backward()
            opt.step()
    return torch.equal(a, b)


def _eval_dropout():
    torch.manual_seed(0)
    drop = nn.Dropout(0.5)
    drop.eval()
    x = torch.ones(1000)
    return (drop(x) == 0).sum()


def _clip_before_unscale():
    w = nn.Parameter(torch.tensor([5.0]))
    opt = torch.optim.SGD([w], lr=1.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    scaler.scale((w * w).sum() / 2).backward()  # true gradient: w = 5
    nn.utils.clip_grad_norm_([w], max_norm=1.0)  # before scaler.unscale_(opt)
    scaler.step(opt)
    return 5.0 - w.item()


QUESTIONS = (
    Question("no_zero_grad", "Three backward passes of loss = 2·w with no zero_grad in between. What is w.grad?",
             _no_zero_grad, "`.grad` accumulates (adds) on every backward: 2 + 2 + 2 = 6. That is why the loop calls "
             "`optimizer.zero_grad()` once per step — and why gradient accumulation works without extra code.",
             kind="number"),
    Question("zero_grad_none", "After optimizer.zero_grad(), is model.weight.grad None?", _zero_grad_leaves,
             "Since PyTorch 2.0 `zero_grad(set_to_none=True)` is the default: `.grad` becomes None, not a zero "
             "tensor. An optimizer skips parameters whose grad is None — so a step before backward does nothing.",
             choices=("True", "False"), imports=NN),
    Question("onecycle", "OneCycleLR(max_lr=0.1, total_steps=100): what LR after 30 steps?", _onecycle_lr,
             "OneCycle warms up with a cosine from max_lr/25 to max_lr over the first 30% (pct_start=0.3) of the "
             "steps, then anneals down to max_lr/(25·1e4). The peak is step 29 (0.3·100 − 1); step 30 has just "
             "begun the cosine descent: 0.09995.",
             kind="number", imports=NN),
    Question("bce_100", "sigmoid then nn.BCELoss at logit 100 with target 0: what is the loss?", _bce_at_100,
             "sigmoid(100) rounds to exactly 1.0 in float32, so log(1 − p) = −inf; BCELoss clamps each log at −100, "
             "so it reports 100 — right only by luck here, wrong for any larger logit, and its gradient is 0. "
             "BCEWithLogitsLoss computes the same value stably from the logit.", kind="number", imports=NN),
    Question("bce_manual", "−log(1 − sigmoid(100)) computed by hand in float32?", _bce_by_hand_at_100,
             "1 − sigmoid(100) is exactly 0 in float32, and −log(0) = inf (its gradient is NaN). Work in logit "
             "space: −log(1 − σ(x)) = softplus(x), which is what BCEWithLogitsLoss does.", kind="number"),
    Question("ce_probs", "CrossEntropyLoss fed softmax probabilities of a perfectly confident, correct "
             "prediction: what loss?", _ce_on_probs_floor,
             "CrossEntropyLoss applies log_softmax itself. Probabilities (1, 0) become logits, and softmax(1, 0) "
             "gives the correct class only e/(e+1): the loss can never go below log(1 + e⁻¹) ≈ 0.3133.",
             kind="number", imports=NN),
    Question("label_smoothing", "Uniform logits over 4 classes, label_smoothing=0.2: what loss?", _label_smoothing,
             "With uniform logits every −log p_j = log 4 ≈ 1.386, and smoothing mixes (1 − ε)·(−log p_t) with "
             "ε/C·Σ −log p_j — both equal log 4, so the loss is log 4 whatever ε is.", kind="number", imports=NN),
    Question("sum_vs_mean", "Batch of 32: by what factor is the gradient of a sum loss larger than the mean's?",
             _sum_vs_mean, "reduction='sum' is 32 × reduction='mean' for a batch of 32, so the same learning rate "
             "takes a step 32 times larger. Change the batch size and the effective step changes with it.",
             kind="number"),
    Question("scaler", "GradScaler(init_scale=1024) sees an inf gradient. What is its scale after update()?",
             _scaler_backoff, "On an overflow `scaler.step` skips `optimizer.step()` and `update()` multiplies the "
             "scale by backoff_factor (0.5): 1024 → 512. After growth_interval clean steps it doubles again.",
             kind="number", imports=NN),
    Question("fp16_underflow", "What does a gradient of 1e-8 become in float16?", _fp16_underflow,
             "float16's smallest subnormal is about 6e-8, so 1e-8 rounds to 0: the gradient vanishes. Loss scaling "
             "multiplies it up before backward; bfloat16 keeps float32's exponent range and needs no scaling.",
             kind="number"),
    Question("bf16_subnormal", "float32 holds 1e-42 (a subnormal). What does it become in bfloat16?", _bf16_subnormal,
             "0: bfloat16 has float32's exponent bits but only 7 mantissa bits, so its subnormals stop at about "
             "9.2e-41 (float32's at 1.4e-45) and 1e-42 rounds to 0. The normal range is the same, which is why "
             "gradients need no loss scaling; only such edges differ.", kind="number"),
    Question("steplr", "StepLR(step_size=3, gamma=0.1), lr=1.0: what LR after 7 scheduler steps?", _steplr,
             "The LR is multiplied by 0.1 at steps 3 and 6: 1.0 → 0.1 → 0.01.", kind="number", imports=NN),
    Question("adam_adamw", "Adam(weight_decay=0.1) vs AdamW(weight_decay=0.1), same start, 5 steps: same "
             "parameters?", _adam_vs_adamw,
             "No. Adam adds 0.1·θ to the gradient, which is then divided by √v — the decay gets rescaled per "
             "parameter. AdamW shrinks θ by lr·0.1·θ outside the adaptive update (decoupled weight decay).",
             choices=("True", "False"), imports=NN),
    Question("eval_dropout", "nn.Dropout(0.5) in eval mode on 1000 ones: how many zeros?", _eval_dropout,
             "In eval mode dropout is the identity: no zeros. Forgetting model.train() after an evaluation "
             "leaves dropout (and batch-norm updates) switched off for the rest of training.", kind="number",
             imports=NN),
    Question("clip_unscale", "w = 5, loss = w²/2, lr = 1, GradScaler(init_scale=2**16); clip_grad_norm_(max_norm=1) "
             "runs before scaler.unscale_. How far does w move?", _clip_before_unscale,
             "1/65536 ≈ 1.5e-5: the clip saw the scaled gradient (5·65536), cut it to 1, and step() then divided "
             "by the scale. After scaler.unscale_(opt) the clip would see 5, cut it to 1, and w would move 1.",
             kind="number", imports=NN),
)
