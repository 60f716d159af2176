"""Generated questions on attention and transformers: attention shapes, masks and their opposite conventions,
nn.MultiheadAttention's parameter count, the batch_first trap, dropout's scaling, padding vs packing, and RoPE's
relative positions."""

import random

from demos.practice.family import Family, choices, num, plural, shape_text
from demos.quiz import Question

NN = "import torch\nfrom torch import nn\n"
FUNCTIONAL = "import torch\nimport torch.nn.functional as F\n"


def _distinct(rng: random.Random, low: int, high: int, count: int) -> list[int]:
    return rng.sample(range(low, high + 1), count)


# ---- attention shapes --------------------------------------------------------------------------------------------


def attention_shape_question(rng: random.Random) -> Question:
    b, h = rng.randint(1, 4), rng.randint(1, 8)
    queries, keys = _distinct(rng, 2, 12, 2)
    e, ev = _distinct(rng, 2, 16, 2)
    what = rng.choice(["sdpa", "scores", "mix"])
    with_heads = rng.random() < 0.7
    lead = (b, h) if with_heads else (b,)
    q, k, v = (*lead, queries, e), (*lead, keys, e), (*lead, keys, ev)
    code = (FUNCTIONAL + f"\nq = torch.randn{shape_text(q)}\nk = torch.randn{shape_text(k)}\n"
            f"v = torch.randn{shape_text(v)}\n")
    scores, out = (*lead, queries, keys), (*lead, queries, ev)
    if what == "sdpa":
        code += "print(F.scaled_dot_product_attention(q, k, v).shape)\n"
        asked, answer = "F.scaled_dot_product_attention(q, k, v)", out
    elif what == "scores":
        code += "print((q @ k.transpose(-2, -1)).shape)\n"
        asked, answer = "the scores q @ k.transpose(-2, -1)", scores
    else:
        code += f"weights = torch.softmax(q @ k.transpose(-2, -1) / {e} ** 0.5, dim=-1)\nprint((weights @ v).shape)\n"
        asked, answer = "weights @ v", out
    explain = (f"The leading dims {shape_text(lead)} ride along. q @ kᵀ pairs each of the {queries} queries with each "
               f"of the {keys} keys over their shared size {e}: scores {shape_text(scores)}. The softmaxed weights "
               f"mix the {keys} value rows of size {ev}, one mix per query: {shape_text(out)}. The answer: "
               f"{shape_text(answer)}.")
    return Question.from_code(
        "", f"q has shape {shape_text(q)}, k has shape {shape_text(k)} and v has shape {shape_text(v)}. "
            f"What is the shape of {asked}?", code, explain, kind="shape")


# ---- attention masks ----------------------------------------------------------------------------------------------

MASKS = {  # kind: the mask as the prompt names it
    "sdpa_bool": "a boolean attn_mask passed to F.scaled_dot_product_attention",
    "sdpa_causal": "is_causal=True in F.scaled_dot_product_attention",
    "mha_padding": "a boolean key_padding_mask passed to nn.MultiheadAttention",
    "mha_bool": "a boolean attn_mask passed to nn.MultiheadAttention",
}


def _flags(rng: random.Random, n: int, true_is_allowed: bool) -> list[bool]:
    """A key mask of n flags with at least one allowed key."""
    while True:
        allowed = [rng.random() < 0.6 for _ in range(n)]
        if any(allowed):
            return [a if true_is_allowed else not a for a in allowed]


def attention_mask_question(rng: random.Random) -> Question:
    kind = rng.choice(list(MASKS))
    n = rng.randint(3, 6)
    query, key = rng.randrange(n), rng.randrange(n)
    if kind == "sdpa_causal":
        code = (FUNCTIONAL + f"\nq = k = torch.zeros(1, {n}, 4)  # every score is 0\nv = torch.eye({n}).unsqueeze(0)  "
                "# so the output rows are the weights\n"
                "weights = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
                f"print(round(weights[0, {query}, {key}].item(), 4))\n")
        allowed = [j <= query for j in range(n)]
        rule = f"is_causal=True lets query {query} see keys 0 to {query} only"
    elif kind == "sdpa_bool":
        flags = _flags(rng, n, True)
        code = (FUNCTIONAL + f"\nq = k = torch.zeros(1, {n}, 4)  # every score is 0\nv = torch.eye({n}).unsqueeze(0)  "
                f"# so the output rows are the weights\nmask = torch.tensor({flags})  # one flag per key\n"
                "weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n"
                f"print(round(weights[0, {query}, {key}].item(), 4))\n")
        allowed = flags
        rule = "In F.scaled_dot_product_attention a boolean mask is True where a key takes part"
    else:
        flags = _flags(rng, n, False)
        mask = f"key_padding_mask=torch.tensor([{flags}])" if kind == "mha_padding" else \
            f"attn_mask=torch.tensor({flags}).expand({n}, {n})"
        code = (NN + f"\ntorch.manual_seed(0)\nmha = nn.MultiheadAttention(8, 2, batch_first=True)\n"
                f"x = torch.zeros(1, {n}, 8)  # the same token everywhere: every score is equal\n"
                f"_, weights = mha(x, x, x, {mask})\nprint(round(weights[0, {query}, {key}].item(), 4))\n")
        allowed = [not f for f in flags]
        rule = (f"In nn.MultiheadAttention a boolean {'key_padding_mask' if kind == 'mha_padding' else 'attn_mask'} "
                "is True where a key is left out (the opposite of F.scaled_dot_product_attention's attn_mask)")
    count = sum(allowed)
    weight = 1 / count if allowed[key] else 0.0
    share = (f"so query {query} spreads its weight evenly over {plural(count, 'key')}: 1/{count} = {num(weight)} for "
             f"key {key}" if allowed[key] else f"and key {key} is left out, so its weight is {num(weight)}")
    return Question.from_code(
        "", f"Every attention score below is equal. With {MASKS[kind]}, what weight does query {query} give key "
            f"{key}?", code, f"{rule}; equal scores share the weight evenly among the keys that take part, {share}.",
        kind="number")


# ---- nn.MultiheadAttention's parameters ---------------------------------------------------------------------------


def mha_params_question(rng: random.Random) -> Question:
    e = rng.choice((8, 12, 16, 24, 32, 64))
    heads = rng.choice([h for h in (1, 2, 4, 8) if e % h == 0])
    bias, bias_kv = rng.random() < 0.7, rng.random() < 0.25
    kdim, vdim = (rng.choice((4, 6, 10, 20)), rng.choice((3, 5, 7, 9))) if rng.random() < 0.3 else (e, e)
    args = [str(e), str(heads)] + ([] if bias else ["bias=False"]) + (["add_bias_kv=True"] if bias_kv else []) + \
        ([f"kdim={kdim}", f"vdim={vdim}"] if kdim != e else [])
    made = f"nn.MultiheadAttention({', '.join(args)})"
    code = NN + f"\nmha = {made}\nprint(sum(p.numel() for p in mha.parameters()))\n"
    projections = e * e + e * kdim + e * vdim
    parts = [f"the q, k and v projections {e}×{e} + {e}×{kdim} + {e}×{vdim} = {projections}",
             f"the output projection {e}×{e} = {e * e}"]
    if bias:
        parts.append(f"biases of the three input projections and the output one 4×{e} = {4 * e}")
    if bias_kv:
        parts.append(f"add_bias_kv's two learned rows of {e} = {2 * e}")
    total = projections + e * e + 4 * e * bias + 2 * e * bias_kv
    same = " (with kdim = vdim = E that is 4E² + 4E with biases, 4E² without)" if kdim == e and not bias_kv else ""
    return Question.from_code(
        "", f"How many numbers does {made}.parameters() hold?", code,
        f"{'; '.join(parts)}. Total: {total}{same}. Heads add no parameters: {plural(heads, 'head')} of width "
        f"{e // heads} share the same projections, split along the width {e}.", kind="number")


# ---- the batch_first trap ----------------------------------------------------------------------------------------


def batch_first_question(rng: random.Random) -> Question:
    b, t = _distinct(rng, 2, 9, 2)
    e = rng.choice((4, 8, 16))
    first = rng.random() < 0.4
    asked_output = rng.random() < 0.2
    flag = ", batch_first=True" if first else ""
    code = (NN + f"\nmha = nn.MultiheadAttention({e}, 2{flag})\nx = torch.zeros({b}, {t}, {e})  # {b} sequences of "
            f"{t} tokens\nout, weights = mha(x, x, x)\nprint({'out' if asked_output else 'weights'}.shape)\n")
    if asked_output:
        explain = (f"The output has the input's shape either way: ({b}, {t}, {e}). That is why the trap is silent: "
                   f"{'with' if first else 'without'} batch_first=True the layer reads x as "
                   + (f"{b} sequences of {t} tokens." if first else
                      f"{t} sequences of {b} tokens (sequence first), mixing across the batch."))
    elif first:
        explain = (f"batch_first=True reads x as (batch, sequence, embedding): {b} sequences of {t} tokens, so the "
                   f"weights (averaged over the heads) are one {t}×{t} map per sequence: ({b}, {t}, {t}).")
    else:
        explain = (f"Without batch_first=True, nn.MultiheadAttention reads x as (sequence, batch, embedding): "
                   f"{t} sequences of {b} tokens. Each 'sequence' is one position across your batch, so the weights "
                   f"are ({t}, {b}, {b}): attention mixes different examples. Pass batch_first=True.")
    return Question.from_code(
        "", f"x holds {b} sequences of {t} tokens, shape ({b}, {t}, {e}). What shape is "
            f"{'out' if asked_output else 'weights'}?", code, explain, kind="shape")


# ---- dropout -------------------------------------------------------------------------------------------------------

DROPOUT_KINDS = ("module_train", "module_eval", "functional_eval", "functional_flag_eval", "mean")


def dropout_question(rng: random.Random) -> Question:
    kind = rng.choice(DROPOUT_KINDS)
    p = rng.choice((0.1, 0.2, 0.25, 0.5) if kind == "mean" else (0.1, 0.2, 0.25, 0.5, 0.75, 0.8))
    seed = rng.randint(0, 99)
    scale = 1 / (1 - p)
    functional = "import torch.nn.functional as F\n" if kind.startswith("functional") else ""
    head = NN + functional + f"\ntorch.manual_seed({seed})\n"
    if kind == "mean":
        code = head + (f"x = torch.ones(100_000)\nout = nn.Dropout({p})(x)  # a new module is in training mode\n"
                       "print(round(out.mean().item(), 1))\n")
        return Question.from_code(
            "", f"nn.Dropout({p}) in training mode on 100_000 ones: what is the output's mean, to 1 decimal?",
            code, f"About {p:.0%} of the elements become 0 and the rest become 1/(1 − {p}) = {num(scale)}: the "
                  f"expectation is (1 − {p}) × {num(scale)} = 1, so the mean rounds to 1.0.", kind="number")
    if kind.startswith("module"):
        train = kind == "module_train"
        code = head + (f"layer = nn.Dropout({p})\n" + ("" if train else "layer.eval()\n") +
                       "print(layer(torch.ones(1000)).max().item())\n")
        prompt = f"nn.Dropout({p}){' after .eval()' if not train else ' in training mode'}, on ones: what is the max?"
        explain = (f"In training, dropout zeroes each element with probability {p} and scales the survivors by "
                   f"1/(1 − {p}) = {num(scale)}, so the expected output equals the input and the max is "
                   f"{num(scale)}." if train else
                   "eval() switches nn.Dropout off: it returns its input, so the max is 1.")
    else:
        flag = kind == "functional_flag_eval"
        call = f"F.dropout(x, {p}, training=self.training)" if flag else f"F.dropout(x, {p})"
        code = head + (f"class Net(nn.Module):\n    def forward(self, x):\n        return {call}\n\n\n"
                       "net = Net().eval()\nprint(net(torch.ones(1000)).max().item())\n")
        prompt = f"A module whose forward returns {call}, after .eval(), on ones: what is the max?"
        explain = ("F.dropout is told the mode by training=self.training, which eval() set to False: no dropout, "
                   "the max is 1." if flag else
                   f"F.dropout's training argument defaults to True and eval() cannot reach it: it still drops "
                   f"and scales the survivors by 1/(1 − {p}) = {num(scale)}. Use nn.Dropout or pass "
                   "training=self.training.")
    return Question.from_code("", prompt, code, explain, kind="number")


# ---- padding vs packing --------------------------------------------------------------------------------------------

PACK, UNPACK = "pack_padded_sequence", "pad_packed_sequence"


def _rnn_utils(*names: str) -> str:
    return f"from torch.nn.utils.rnn import {', '.join(names)}\n" if names else ""


def _lengths(rng: random.Random) -> tuple[int, list[int]]:
    """A padded length T and one length per sequence, the longest equal to T."""
    t = rng.randint(3, 7)
    lengths = [rng.randint(1, t) for _ in range(rng.randint(2, 5))]
    lengths[rng.randrange(len(lengths))] = t
    return t, lengths


def packing_question(rng: random.Random) -> Question:
    kind = rng.choice(["rows", "batch_sizes", "last_state", "h_n_shape"])
    t, lengths = _lengths(rng)
    b, f = len(lengths), rng.choice((2, 3, 4))
    packed = kind in ("rows", "batch_sizes") or (kind == "last_state" and rng.random() < 0.6)
    needed = (PACK,) if kind in ("rows", "batch_sizes") else (PACK, UNPACK) if packed else ()
    head = NN + _rnn_utils(*needed) + f"\ntorch.manual_seed(0)\nx = torch.randn({b}, {t}, {f})  # {b} sequences " \
        f"padded to {t}\nlengths = torch.tensor({lengths})\n"
    pack = "packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)\n"
    if kind == "rows":
        code = head + pack + "print(packed.data.shape)\n"
        rows = sum(lengths)
        return Question.from_code(
            "", f"{b} sequences of lengths {lengths}, padded to {t}, are packed. What shape is packed.data?", code,
            f"Packing keeps only the real time steps: {' + '.join(map(str, lengths))} = {rows} rows of {f} features "
            f"({shape_text((rows, f))}), against {b}×{t} = {b * t} padded ones.", kind="shape")
    if kind == "batch_sizes":
        step = rng.randrange(t)
        code = head + pack + f"print(packed.batch_sizes[{step}].item())\n"
        alive = sum(n > step for n in lengths)
        return Question.from_code(
            "", f"Sequences of lengths {lengths} are packed. What is packed.batch_sizes[{step}]?", code,
            f"batch_sizes[i] counts the sequences still running at time step i: lengths above {step} are "
            f"{[n for n in lengths if n > step]}, so {alive}. The RNN runs a batch that shrinks as sequences end.",
            kind="number")
    if kind == "h_n_shape":
        hidden, layers = rng.choice((3, 5, 6)), rng.randint(1, 3)
        first = rng.random() < 0.5
        flag = ", batch_first=True" if first else ""
        code = head + (f"gru = nn.GRU({f}, {hidden}, num_layers={layers}{flag})\n_, h_n = gru(x)\n"
                       "print(h_n.shape)\n")
        explain = ((f"batch_first=True reads x as {b} sequences, but h_n is (num_layers, batch, hidden) whatever "
                    f"batch_first says: ({layers}, {b}, {hidden}).") if first else
                   (f"Without batch_first=True the GRU reads x as (time, batch, features): {b} time steps of a batch "
                    f"of {t}. h_n is (num_layers, batch, hidden) = ({layers}, {t}, {hidden}): the trap is silent."))
        return Question.from_code(
            "", f"x holds {b} sequences of {t} steps, shape ({b}, {t}, {f}), fed to nn.GRU({f}, {hidden}, "
                f"num_layers={layers}{flag}). What shape is h_n?", code, explain, kind="shape")
    who = rng.randrange(b)
    against = rng.choice(["its last real step", "the last padded step"])
    index = f"{lengths[who] - 1}" if against == "its last real step" else "-1"
    run = (pack + "out, (h_n, _) = lstm(packed)\nout, _ = pad_packed_sequence(out, batch_first=True)\n" if packed
           else "out, (h_n, _) = lstm(x)\n")
    code = head + (f"lstm = nn.LSTM({f}, 4, batch_first=True)\n" + run +
                   f"print(torch.allclose(h_n[-1, {who}], out[{who}, {index}]))\n")
    full = lengths[who] == t
    if packed:
        why = (f"With packing the LSTM stops sequence {who} after its {plural(lengths[who], 'real step')}, so h_n "
               f"holds its state at step {lengths[who] - 1}; pad_packed_sequence fills the later steps with zeros. " +
               ("Comparing with that step: True." if against == "its last real step" else
                ("Its length is the full padded length, so out[-1] is that step: True." if full else
                 "out[..., -1] is a zero of the padding: False.")))
    else:
        why = (f"Without packing the LSTM runs all {t} steps, padding included, so h_n is its state after step "
               f"{t - 1}, which is out[:, -1]. " +
               ("Comparing with the last padded step: True." if against == "the last padded step" else
                (f"Sequence {who} is full length, so its last real step is step {t - 1}: True." if full else
                 f"Its last real step is {lengths[who] - 1}; the state moved on through the padding: False.")))
    return Question.from_code(
        "", f"Sequences of lengths {lengths} padded to {t}, run through an LSTM "
            f"{'packed' if packed else 'as a padded batch, not packed'}. Does h_n for sequence {who} equal out at "
            f"{against} (index {index})?", code, why, choices=("True", "False"))


# ---- RoPE's relative property ---------------------------------------------------------------------------------------

ROPE = '''def rope(x, pos, base=10000.0):
    """Rotate each pair (x[2i], x[2i+1]) by the angle pos * base ** (-2i / d)."""
    d = x.shape[-1]
    angle = pos * base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    even, odd = x[0::2], x[1::2]
    return torch.stack([even * angle.cos() - odd * angle.sin(), even * angle.sin() + odd * angle.cos()], -1).flatten()
'''


def rope_question(rng: random.Random) -> Question:
    d, seed = rng.choice((4, 8, 16)), rng.randint(0, 99)
    head = f"import torch\n\n\n{ROPE}\n\ntorch.manual_seed({seed})\nq = torch.randn({d}, dtype=torch.float64)\n"
    if rng.random() < 0.25:
        pos = rng.randint(1, 50)
        code = head + f"print(round((rope(q, {pos}).norm() / q.norm()).item(), 4))\n"
        return Question.from_code(
            "", f"RoPE rotates a query of size {d} for position {pos}. What is its norm divided by the original norm?",
            code, "Each pair of coordinates is rotated by an angle, and rotations keep lengths: the ratio is 1. RoPE "
                  "changes q's direction only, not its norm; the score q·k still changes with position, through "
                  "the angle between the rotated q and k, which depends on the offset m − n.", kind="number")
    m, n = rng.randint(2, 12), rng.randint(0, 12)
    while n == m:
        n = rng.randint(0, 12)
    s = rng.randint(1, 9)
    right = (m + s, n + s)
    wrong = [(m + s, n), (n, m), (m + s, max(0, n - s)), (m, n + s), (m + 2 * s, n + s)]
    wrong = [w for w in wrong if w[0] - w[1] != m - n]
    shown = choices(shape_text(right), [shape_text(w) for w in wrong], rng)
    pairs = [tuple(int(v) for v in c.strip("()").split(", ")) for c in shown]
    code = head + (f"k = torch.randn({d}, dtype=torch.float64)\nreference = rope(q, {m}) @ rope(k, {n})\n"
                   f"pairs = {pairs}  # (query position, key position)\n"
                   "print(min(pairs, key=lambda p: abs(rope(q, p[0]) @ rope(k, p[1]) - reference)))\n")
    return Question.from_code(
        "", f"With RoPE, the query at position {m} and the key at position {n} score `reference`. Which (query "
            "position, key position) pair gives the same score?", code,
        f"Rotating q by mθ and k by nθ leaves their dot product depending on the angle between them, (m − n)θ, "
        f"only: the relative position {m - n}. {shape_text(right)} has {right[0]} − {right[1]} = {m - n}; the "
        "others do not.", choices=shown)


FAMILIES = (
    Family("attn_shape", "Shapes through scaled dot-product attention", "transformers", "Attention shapes",
           attention_shape_question, "Scaled dot-product attention", (("tf_tab", "Attention"),)),
    Family("attn_mask", "Attention weights under a mask", "transformers", "Attention masks",
           attention_mask_question, "Attention masks", (("tf_tab", "Attention"),)),
    Family("mha_params", "Parameters of nn.MultiheadAttention", "transformers", "Multi-head attention",
           mha_params_question, "Multi-head attention", (("tf_tab", "Multi-head"),)),
    Family("batch_first", "The batch_first trap of nn.MultiheadAttention", "transformers", "batch_first",
           batch_first_question, "Multi-head attention", (("tf_tab", "Multi-head"),)),
    Family("dropout_scale", "Dropout in training and eval", "transformers", "Dropout", dropout_question, "Dropout",
           (("tf_tab", "Embeddings & dropout"),)),
    Family("packing", "Padding vs packing for RNNs", "transformers", "Padding and packing", packing_question,
           "RNNs, padding and packing", (("tf_tab", "Sequences"),)),
    Family("rope", "RoPE depends on relative position", "transformers", "Positional encodings", rope_question,
           "Positional encodings", (("tf_tab", "Positions"),)),
)
