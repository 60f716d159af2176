"""Sequences: the shapes of RNN, LSTM and GRU outputs read from real modules, the last hidden state of padded
sequences with and without packing, enforce_sorted, and why attention replaced recurrence (T sequential steps
against one, timed on this CPU)."""

import time
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence

from demos.errors import InputError, quoted
from demos.parsing import parse_numbers, plural, whole_in_range
from demos.quiz import Question
from demos.shown import Script, entry, print_each, script

IMPORTS = "import torch\nimport torch.nn as nn"
PACK_IMPORTS = "import torch\nimport torch.nn as nn\nfrom torch.nn.utils.rnn import pack_padded_sequence, pad_sequence"
TIMING_IMPORTS = "import time\nfrom functools import partial\n\nimport torch\nimport torch.nn as nn"
CELLS = ("RNN", "LSTM", "GRU")
MAX_LAYERS = 3
MAX_BATCH = 4
MAX_LEN = 12
MAX_FEATURES = 16  # input and hidden sizes
MAX_SEED = 9999
MIN_SEQUENCES, MAX_SEQUENCES = 2, 6
DEFAULT_LENGTHS = "5, 3, 2, 5"
WIDTHS = (16, 32, 64)
TIMING_LENGTHS = (4, 8, 16, 32, 64, 128)
REPEATS = 5  # each time is the fastest of this many runs: the least disturbed by the rest of the host


# ---- validation -------------------------------------------------------------------------------------------------


def validate_cell(cell: str) -> None:
    if cell not in CELLS:
        raise InputError(f"Recurrent module must be one of {', '.join(CELLS)}; got {quoted(cell)}.")


def validate_seed(seed: int) -> None:
    if not 0 <= seed <= MAX_SEED:
        raise InputError(f"Seed must be between 0 and {MAX_SEED}; got {seed}.")


def validate_shapes(layers: int, batch: int, length: int, input_size: int, hidden: int) -> None:
    for label, value, high in (("Layers", layers, MAX_LAYERS), ("Batch size", batch, MAX_BATCH),
                               ("Sequence length", length, MAX_LEN), ("Input size", input_size, MAX_FEATURES),
                               ("Hidden size", hidden, MAX_FEATURES)):
        if not 1 <= value <= high:
            raise InputError(f"{label} must be between 1 and {high}; got {value}.")


def read_lengths(text: str) -> tuple[int, ...]:
    """'5, 3, 2' -> (5, 3, 2): 2 to 6 sequence lengths, each a whole number from 1 to 12."""
    values = parse_numbers(text, "Sequence lengths", MIN_SEQUENCES, MAX_SEQUENCES, example="a length such as 5",
                           list_example="5, 3, 2")
    return tuple(whole_in_range(v, f"Sequence lengths, entry {i + 1}", 1, MAX_LEN) for i, v in enumerate(values))


def validate_width(width: int) -> None:
    if width not in WIDTHS:
        raise InputError(f"Width must be one of {', '.join(map(str, WIDTHS))}; got {width}.")


# ---- the torch core the snippets show ---------------------------------------------------------------------------


def rounded(t: torch.Tensor) -> tuple:
    """A 2-D tensor as rows of floats to 4 decimals (what the heatmaps show)."""
    return tuple(tuple(round(v, 4) for v in row) for row in t.detach().tolist())


def shape_facts(cell: str, layers: int, bidirectional: bool, batch_first: bool, batch: int, length: int,
                input_size: int, hidden: int, seed: int) -> dict:
    """Run one recurrent layer and read its shapes; check where h_n sits inside output."""
    torch.manual_seed(seed)
    rnn = getattr(nn, cell)(input_size, hidden, num_layers=layers, bidirectional=bidirectional,
                            batch_first=batch_first)
    x = torch.randn(batch, length, input_size) if batch_first else torch.randn(length, batch, input_size)
    with torch.no_grad():
        output, state = rnn(x)
    h_n, c_n = state if cell == "LSTM" else (state, None)  # an LSTM also returns its cell state
    seq0 = output[0] if batch_first else output[:, 0]  # sequence 0: (length, directions * hidden)
    last_layer = h_n[-(2 if bidirectional else 1):, 0]  # h_n is (layers * directions, batch, hidden) either way
    return dict(
        input_shape=tuple(x.shape), output_shape=tuple(output.shape), h_n_shape=tuple(h_n.shape),
        c_n_shape=tuple(c_n.shape) if c_n is not None else None,
        weight_shapes=tuple((name, tuple(p.shape)) for name, p in rnn.named_parameters()
                            if name.startswith("weight") and not name.endswith("_reverse")),
        output_seq0=rounded(seq0), h_n_seq0=rounded(h_n[:, 0]),
        forward_h_n_is_last_output=torch.equal(last_layer[0], seq0[-1, :hidden]),
        backward_h_n_is_first_output=torch.equal(last_layer[1], seq0[0, hidden:]) if bidirectional else None,
    )


def last_hidden(rnn: nn.Module, x) -> torch.Tensor:
    """The last layer's h_n: (batch, hidden); x is a padded batch or a PackedSequence."""
    _, state = rnn(x)
    h_n = state[0] if isinstance(state, tuple) else state  # an LSTM returns (h_n, c_n)
    return h_n[-1]


def packing_facts(cell: str, lengths: tuple, seed: int) -> dict:
    """h_n of each sequence from the padded batch, from the packed batch, and from the sequence run alone."""
    torch.manual_seed(seed)
    rnn = getattr(nn, cell)(3, 4, batch_first=True)
    seqs = [torch.randn(n, 3) for n in lengths]
    padded = pad_sequence(seqs, batch_first=True)  # (batch, max length, 3), zeros after each sequence's end
    packed = pack_padded_sequence(padded, torch.tensor(lengths), batch_first=True, enforce_sorted=False)
    with torch.no_grad():
        h_padded = last_hidden(rnn, padded)  # runs every sequence through the padding zeros too
        h_packed = last_hidden(rnn, packed)  # stops each sequence at its own length
        h_alone = torch.stack([last_hidden(rnn, s[None])[0] for s in seqs])
    try:
        pack_padded_sequence(padded, torch.tensor(lengths), batch_first=True)  # enforce_sorted=True by default
        enforce_sorted_error = ""
    except RuntimeError as err:
        enforce_sorted_error = str(err)
    return dict(
        lengths=lengths, padded_shape=tuple(padded.shape),
        padded_vs_alone=tuple((h_padded - h_alone).abs().amax(dim=1).tolist()),
        packed_vs_alone=tuple((h_packed - h_alone).abs().amax(dim=1).tolist()),
        h_padded=rounded(h_padded), h_packed=rounded(h_packed), h_alone=rounded(h_alone),
        batch_sizes=tuple(packed.batch_sizes.tolist()), sorted_indices=tuple(packed.sorted_indices.tolist()),
        enforce_sorted_error=enforce_sorted_error,
    )


@torch.no_grad()  # values only: nothing here is trained
def unrolled_steps(lstm: nn.LSTM, x: torch.Tensor) -> tuple[int, float]:
    """Run the LSTM one time step at a time with an LSTMCell holding its weights: how many steps ran one after
    the other, and the largest difference from nn.LSTM's own output."""
    cell = nn.LSTMCell(lstm.input_size, lstm.hidden_size)
    cell.load_state_dict({name.removesuffix("_l0"): p for name, p in lstm.state_dict().items()})
    calls = []
    cell.register_forward_hook(lambda *_: calls.append(1))
    h = c = torch.zeros(x.shape[0], lstm.hidden_size)
    outs = []
    for t in range(x.shape[1]):  # step t needs h from step t - 1: the steps cannot run at once
        h, c = cell(x[:, t], (h, c))
        outs.append(h)
    return len(calls), float((torch.stack(outs, 1) - lstm(x)[0]).abs().max())


def attention_calls(attention: nn.MultiheadAttention, x: torch.Tensor) -> int:
    """How many times the attention layer runs to cover every position: once, whatever the length."""
    calls = []
    handle = attention.register_forward_hook(lambda *_: calls.append(1))
    attention(x, x, x, need_weights=False)
    handle.remove()
    return len(calls)


def fastest_ms(run, repeats: int) -> float:
    """The fastest of `repeats` runs after one untimed warm-up run, in milliseconds."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def timing_facts(width: int, lengths: tuple, repeats: int, seed: int) -> dict:
    """Sequential steps and the time of one forward, per sequence length, for an LSTM and one attention layer."""
    torch.manual_seed(seed)
    lstm = nn.LSTM(width, width, batch_first=True)
    attention = nn.MultiheadAttention(width, num_heads=4, batch_first=True)
    facts = dict(threads=torch.get_num_threads(), lengths=lengths, lstm_steps=[], attention_calls=[],
                 unrolled_max_diff=[], lstm_ms=[], attention_ms=[])
    with torch.no_grad():
        for n in lengths:
            x = torch.randn(1, n, width)
            steps, diff = unrolled_steps(lstm, x)
            facts["lstm_steps"].append(steps)
            facts["unrolled_max_diff"].append(diff)
            facts["attention_calls"].append(attention_calls(attention, x))
            facts["lstm_ms"].append(fastest_ms(partial(lstm, x), repeats))
            facts["attention_ms"].append(fastest_ms(partial(attention, x, x, x, need_weights=False), repeats))
    return {name: tuple(v) if isinstance(v, list) else v for name, v in facts.items()}


# ---- results and entries ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShapeResult:
    cell: str
    layers: int
    bidirectional: bool
    batch_first: bool
    hidden: int
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    h_n_shape: tuple[int, ...]
    c_n_shape: tuple[int, ...] | None
    weight_shapes: tuple[tuple[str, tuple[int, ...]], ...]
    output_seq0: tuple  # output of sequence 0: (length, directions * hidden), 4 decimals
    h_n_seq0: tuple  # h_n of sequence 0: (layers * directions, hidden)
    forward_h_n_is_last_output: bool
    backward_h_n_is_first_output: bool | None
    code: Script

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1


@entry("GRU", 2, True, True, 2, 5, 3, 4, 1)
def rnn_shapes(cell: str = "LSTM", layers: int = 2, bidirectional: bool = True, batch_first: bool = True,
               batch: int = 3, length: int = 6, input_size: int = 5, hidden: int = 4, seed: int = 0) -> ShapeResult:
    """The shapes a real recurrent module returns for the visitor's settings."""
    validate_cell(cell)
    validate_shapes(layers, batch, length, input_size, hidden)
    validate_seed(seed)
    settings = dict(cell=cell, layers=layers, bidirectional=bidirectional, batch_first=batch_first, batch=batch,
                    length=length, input_size=input_size, hidden=hidden, seed=seed)
    code = script(rounded, shape_facts, imports=IMPORTS, settings=settings,
                  run=f"facts = shape_facts({', '.join(settings)})\n" + print_each("facts"))
    return ShapeResult(cell=cell, layers=layers, bidirectional=bidirectional, batch_first=batch_first, hidden=hidden,
                       **shape_facts(**settings), code=code)


@dataclass(frozen=True)
class PackingResult:
    cell: str
    lengths: tuple[int, ...]
    padded_shape: tuple[int, ...]
    padded_vs_alone: tuple[float, ...]  # max |h_n padded − h_n alone| per sequence
    packed_vs_alone: tuple[float, ...]
    h_padded: tuple  # (batch, hidden), 4 decimals
    h_packed: tuple
    h_alone: tuple
    batch_sizes: tuple[int, ...]  # the PackedSequence's sequences still running at each time step
    sorted_indices: tuple[int, ...]
    enforce_sorted_error: str  # torch's message for the same lengths with enforce_sorted=True; empty if sorted
    code: Script

    @property
    def longest(self) -> int:
        return max(self.lengths)


@entry("LSTM", "3, 4, 1", 2)
def padding_vs_packing(cell: str = "GRU", lengths_text: str = DEFAULT_LENGTHS, seed: int = 0) -> PackingResult:
    """h_n per sequence: padded batch, packed batch and each sequence alone."""
    validate_cell(cell)
    lengths = read_lengths(lengths_text)
    validate_seed(seed)
    code = script(rounded, last_hidden, packing_facts, imports=PACK_IMPORTS,
                  settings={"cell": cell, "lengths": lengths, "seed": seed},
                  run=print_each("packing_facts(cell, lengths, seed)"))
    return PackingResult(cell=cell, **packing_facts(cell, lengths, seed), code=code)


@dataclass(frozen=True)
class TimingResult:
    width: int
    threads: int  # torch's intra-op threads while timing
    lengths: tuple[int, ...]
    lstm_steps: tuple[int, ...]  # LSTMCell calls, one after the other, to cover each length
    attention_calls: tuple[int, ...]
    unrolled_max_diff: tuple[float, ...]  # unrolled cell loop against nn.LSTM
    lstm_ms: tuple[float, ...]
    attention_ms: tuple[float, ...]
    repeats: int
    code: Script


@entry(16, (4, 8), 2)
def recurrence_vs_attention(width: int = 32, lengths: tuple = TIMING_LENGTHS, repeats: int = REPEATS,
                            seed: int = 0) -> TimingResult:
    """Sequential steps and forward time per length, LSTM against one attention layer, on this CPU now."""
    validate_width(width)
    if not lengths or any(n not in TIMING_LENGTHS for n in lengths) or not 1 <= repeats <= REPEATS:
        raise InputError(f"Lengths must be among {TIMING_LENGTHS} and repeats from 1 to {REPEATS}.")
    validate_seed(seed)
    code = script(unrolled_steps, attention_calls, fastest_ms, timing_facts, imports=TIMING_IMPORTS,
                  settings={"width": width, "lengths": lengths, "repeats": repeats, "seed": seed},
                  run="torch.set_num_threads(1)  # as the server runs its demos\n"
                      + print_each("timing_facts(width, lengths, repeats, seed)"))
    return TimingResult(width=width, repeats=repeats, **timing_facts(width, lengths, repeats, seed), code=code)


# ---- sentences the page shows, read from the results -------------------------------------------------------------

GATE_NAMES = {"RNN": "", "LSTM": " (input, forget, cell, output)", "GRU": " (reset, update, new)"}
TOLERANCE = 1e-5  # float32 rounding of a differently batched run stays far below this; a real difference does not


def shapes_sentence(r: ShapeResult) -> str:
    order = "batch, time" if r.batch_first else "time, batch"
    c_n = f" The LSTM's c_n has the same shape, {r.c_n_shape}." if r.c_n_shape else ""
    return (f"x {r.input_shape} = ({order}, features). **output {r.output_shape}** = ({order}, directions × hidden "
            f"= {r.directions} × {r.hidden}): the last layer's hidden state at every step. **h_n {r.h_n_shape}** = "
            f"(layers × directions = {r.layers} × {r.directions}, batch, hidden): batch_first={r.batch_first} "
            f"{'does not move the batch in h_n' if r.batch_first else 'is the default, so batch is dim 1 everywhere'}."
            f"{c_n}")


def columns(which: str, n: int) -> str:
    """'first 4 columns', 'first column'."""
    return f"{which} column" if n == 1 else f"{which} {n} columns"


def match_sentence(r: ShapeResult) -> str:
    def said(same: bool) -> str:
        return "equal, bit for bit" if same else "**not** equal"
    text = (f"Framed (solid): the last layer's forward h_n and output at the last step, {columns('first', r.hidden)}: "
            f"{said(r.forward_h_n_is_last_output)}.")
    if r.bidirectional:
        text += (f" Dashed: its backward h_n and output at t = 0, {columns('last', r.hidden)}: "
                 f"{said(r.backward_h_n_is_first_output)}, because the backward direction ends at the first step. "
                 f"So `{'output[:, -1]' if r.batch_first else 'output[-1]'}` is not the backward direction's "
                 "summary of a sequence.")
    return text


def gate_sentence(r: ShapeResult) -> str:
    name, shape = r.weight_shapes[0]
    gates = shape[0] // r.hidden
    return (f"`{name}` is {shape}: {plural(gates, 'gate')} × hidden {r.hidden} = {plural(shape[0], 'row')}"
            f"{GATE_NAMES[r.cell]}, one column per input feature; a later layer's `weight_ih` takes directions × "
            "hidden inputs.")


def packing_sentence(r: PackingResult) -> str:
    short = [i for i, n in enumerate(r.lengths) if n < r.longest]
    differs = [i for i in short if r.padded_vs_alone[i] > TOLERANCE]
    packed_equal = all(v <= TOLERANCE for v in r.packed_vs_alone)
    if not short:
        text = "Every sequence has the longest length, so there is no padding and all three runs agree."
    elif differs:
        text = (f"In the padded batch the {r.cell} keeps stepping through the zeros after sequence"
                f"{'s' if len(differs) > 1 else ''} {', '.join(map(str, differs))} end"
                f"{'' if len(differs) > 1 else 's'}: their h_n is off by up to "
                f"**{max(r.padded_vs_alone[i] for i in differs):.2g}** from the same sequence run alone.")
    else:
        text = "The padded run happened to match every sequence run alone here."
    worst = max(r.packed_vs_alone)
    if not packed_equal:
        packed = f"Packed, the largest difference from the sequence alone is {worst:.2g}."
    elif worst == 0:
        packed = "Packed, every h_n equals the sequence alone exactly."
    else:
        packed = (f"Packed, every h_n equals the sequence alone to within {worst:.1g} (float32 rounding of a "
                  "differently batched matmul).")
    return f"{text} {packed}"


def batch_sizes_sentence(r: PackingResult) -> str:
    return (f"The PackedSequence's batch_sizes {list(r.batch_sizes)} count the sequences still running at each "
            f"step: {sum(r.batch_sizes)} steps of real data instead of the {len(r.lengths)} × {r.longest} = "
            f"{len(r.lengths) * r.longest} of the padded batch.")


def enforce_sorted_sentence(r: PackingResult) -> str:
    if not r.enforce_sorted_error:
        return (f"These lengths {list(r.lengths)} are in decreasing order, so the default enforce_sorted=True packs "
                "them as they are. Type them unsorted (2, 5, 3) to see torch refuse.")
    return (f"The default `enforce_sorted=True` requires lengths in decreasing order; for {list(r.lengths)} torch "
            f"raised, just now, the message below. With `enforce_sorted=False` it sorts them itself "
            f"(sorted_indices {list(r.sorted_indices)}) and hands h_n back in your order.")


def grew(factor: float) -> str:
    """A measured growth factor in words that stay true when a timing did not grow."""
    if factor >= 1.05:
        return f"grew {factor:.1f}×"
    return f"stayed about the same ({factor:.2f}×)" if factor > 0.95 else f"shrank to {factor:.2f}×"


def timing_sentences(r: TimingResult) -> list[str]:
    first, last = 0, len(r.lengths) - 1
    growth = r.lengths[last] / r.lengths[first]
    faster = sum(a < b for a, b in zip(r.attention_ms, r.lstm_ms, strict=True))
    lstm_growth, attention_growth = r.lstm_ms[last] / r.lstm_ms[first], r.attention_ms[last] / r.attention_ms[first]
    counts = sorted(set(r.attention_calls))
    calls = "once" if counts == [1] else f"{', '.join(map(str, counts))} times"
    return [
        f"To cover T positions the LSTM ran its cell {', '.join(map(str, r.lstm_steps))} times, one call after "
        f"the other (the unrolled LSTMCell loop matches nn.LSTM within {max(r.unrolled_max_diff):.1g}); the "
        f"attention layer ran {calls} at every length: every position goes through the same matmuls, none "
        "waiting for another.",
        f"Measured on this server's CPU ({plural(r.threads, 'thread')}, fastest of "
        f"{plural(r.repeats, 'run')}, width {r.width}): from T = "
        f"{r.lengths[first]} to T = {r.lengths[last]} ({growth:g}× longer) the LSTM's time {grew(lstm_growth)} "
        f"and attention's {grew(attention_growth)}; "
        f"at T = {r.lengths[last]} the LSTM took {r.lstm_ms[last]:.3g} ms and attention {r.attention_ms[last]:.3g} "
        f"ms. Attention was faster at {faster} of {len(r.lengths)} lengths.",
        growth_sentence(r),
        GPU_EXPECTATION,
    ]


FAR_LESS = 0.25  # time grew by under a quarter of the work's growth: a fixed cost per call dominates
IN_STEP = 0.7  # time grew by at least 70% of the work's growth: the work dominates


def regime(time_growth: float, work_growth: float) -> str:
    """'overhead', 'work' or 'both': what a timing's growth against its work's growth says."""
    ratio = time_growth / work_growth
    return "overhead" if ratio < FAR_LESS else "work" if ratio >= IN_STEP else "both"


def growth_sentence(r: TimingResult) -> str:
    """Time growth against work growth for both models, over the whole range and over the last doubling.

    The LSTM's work grows with its cell calls (counted), attention's at least as T (its projections) and at most
    as T² (its score matrix): a timing is compared with the least its work grew, so 'far less than the work' is
    never said of work that grew less."""
    first, last = 0, len(r.lengths) - 1
    t_growth = r.lengths[last] / r.lengths[first]
    steps_growth = r.lstm_steps[last] / r.lstm_steps[first]
    lstm_growth, attention_growth = r.lstm_ms[last] / r.lstm_ms[first], r.attention_ms[last] / r.attention_ms[first]
    said = (f"Against the work: from T = {r.lengths[first]} to {r.lengths[last]} the LSTM made {steps_growth:g}× the "
            f"cell calls and its time {grew(lstm_growth)}; attention's score matrix grew {t_growth**2:g}× "
            f"(its projections {t_growth:g}×) and its time {grew(attention_growth)}.")
    kinds = regime(lstm_growth, steps_growth), regime(attention_growth, t_growth)
    verdicts = {
        "overhead": "far less than its work, so a fixed cost per call, paid at every length, dominates its time",
        "both": "less than its work, so both a fixed cost per call and the work count",
        "work": "about as fast as its work or faster, so the work dominates its time",
    }
    if kinds[0] == kinds[1]:
        said += f" Both times grew {verdicts[kinds[0]].replace('its work', 'the work').replace('its time', 'them')}."
    else:
        said += f" The LSTM's time grew {verdicts[kinds[0]]}; attention's grew {verdicts[kinds[1]]}."
    if last > first + 1:  # the last step of lengths: where the work, if anywhere, shows first
        before = last - 1
        step = r.lengths[last] / r.lengths[before]
        ends = [(name, ms[last] / ms[before], work) for name, ms, work in (
            ("the LSTM's", r.lstm_ms, r.lstm_steps[last] / r.lstm_steps[before]),
            ("attention's", r.attention_ms, step))]
        working = [f"{name} time {grew(g)} for {w:g}× the {'cell calls' if 'LSTM' in name else 'positions'}"
                   for (name, g, w), kind in zip(ends, kinds, strict=True) if regime(g, w) == "work" != kind]
        if working:
            said += (f" Over the last step, T = {r.lengths[before]} to {r.lengths[last]}, {' and '.join(working)}: "
                     "there the work starts to dominate.")
    return said


GPU_EXPECTATION = (
    "Not measured here (these timings ran on a CPU): on a GPU one would expect attention's advantage to grow with T, "
    "because its matmuls over all positions are single calls that thousands of cores share, while the LSTM's T "
    "cell steps still have to run one after another.")


# ---- predict-then-run questions ---------------------------------------------------------------------------------


def _h_n_shape():
    lstm = nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)
    x = torch.randn(4, 10, 8)  # (batch, time, features)
    output, (h_n, c_n) = lstm(x)
    return h_n.shape


def _output_shape():
    lstm = nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)
    x = torch.randn(4, 10, 8)
    output, (h_n, c_n) = lstm(x)
    return output.shape


def _padded_equals_alone():
    torch.manual_seed(0)
    gru = nn.GRU(3, 4, batch_first=True)
    short = torch.randn(1, 2, 3)  # a sequence of length 2
    padded = torch.cat([short, torch.zeros(1, 3, 3)], dim=1)  # padded with zeros to length 5
    _, h_alone = gru(short)
    _, h_padded = gru(padded)
    return torch.allclose(h_alone, h_padded)


def _unsorted_lengths():
    x = torch.randn(3, 5, 2)
    try:
        pack_padded_sequence(x, torch.tensor([2, 5, 3]), batch_first=True)
        outcome = "it packs them"
    except Exception as err:
        outcome = type(err).__name__
    return outcome


QUESTIONS = (
    Question("seq_h_n_shape", "A 2-layer bidirectional LSTM with batch_first=True gets x of shape (4, 10, 8). "
             "What is h_n.shape?", _h_n_shape,
             "h_n is (num_layers × num_directions, batch, hidden) = (2 × 2, 4, 16). batch_first applies to the "
             "input and output only: h_n keeps the batch in dim 1.", kind="shape", imports=IMPORTS),
    Question("seq_output_shape", "Same LSTM, same x: what is output.shape?", _output_shape,
             "output holds the last layer's hidden state at every time step, both directions side by side: "
             "(batch, time, 2 × hidden) = (4, 10, 32) with batch_first=True.", kind="shape", imports=IMPORTS),
    Question("seq_padded_alone", "Does the GRU's h_n for the zero-padded sequence equal h_n for the sequence alone?",
             _padded_equals_alone, "No: the GRU keeps stepping through the three padding zeros, and each step "
             "changes the hidden state (the biases alone move it). pack_padded_sequence stops each sequence at "
             "its own length.", choices=("True", "False"), imports=IMPORTS),
    Question("seq_enforce_sorted", "pack_padded_sequence with lengths [2, 5, 3] and the default arguments:",
             _unsorted_lengths, "enforce_sorted defaults to True, which requires lengths in decreasing order: torch "
             "raises a RuntimeError. Pass enforce_sorted=False and it sorts (and unsorts h_n) for you.",
             choices=("it packs them", "RuntimeError", "ValueError", "it sorts them silently"), imports=PACK_IMPORTS),
)
