"""collate_fn: what default_collate refuses, a padding collate with its mask, and bucketing by length."""

from dataclasses import dataclass

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

from demos.errors import InputError
from demos.parsing import parse_numbers, whole_in_range
from demos.shown import entry, print_each, script

MAX_LEN = 48
MAX_BATCH_ITEMS = 12
MAX_CORPUS = 4096


@dataclass(frozen=True)
class PadResult:
    lengths: tuple[int, ...]
    default_error: str  # torch's own message from default_collate, or "" if it worked
    padded: tuple[tuple[int, ...], ...]
    mask: tuple[tuple[bool, ...], ...]
    shape: tuple[int, ...]
    padding_fraction: float
    code: str


@dataclass(frozen=True)
class BucketResult:
    sequences: int
    batch_size: int
    random_padding: float  # padded tokens / all tokens, shuffled batches
    bucketed_padding: float  # the same, batches of similar length
    random_max_lengths: tuple[int, ...]
    bucketed_max_lengths: tuple[int, ...]
    code: str


def parse_lengths(text: str) -> tuple[int, ...]:
    """'5, 3, 8' -> (5, 3, 8): 2 to 12 sequence lengths, each a whole number from 1 to 48."""
    values = parse_numbers(text, "Sequence lengths", min_count=2, max_count=MAX_BATCH_ITEMS)
    return tuple(whole_in_range(v, f"Sequence lengths, entry {i + 1}", 1, MAX_LEN) for i, v in enumerate(values))


def make_sequences(lengths) -> list[torch.Tensor]:
    """Token ids 1..len for each length (0 is kept for padding)."""
    return [torch.arange(1, n + 1) for n in lengths]


def pad_collate(batch: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad to the longest sequence of the batch; mask is True on real tokens."""
    lengths = torch.tensor([len(s) for s in batch])
    padded = pad_sequence(batch, batch_first=True, padding_value=0)
    mask = torch.arange(padded.shape[1]) < lengths[:, None]
    return padded, mask


def pad_both(lengths: tuple[int, ...]) -> dict:
    """default_collate on variable lengths (torch's error) next to the padding collate."""
    seqs = make_sequences(lengths)
    try:
        next(iter(DataLoader(seqs, batch_size=len(seqs))))  # default_collate
        error = ""
    except RuntimeError as err:
        error = str(err)
    padded, mask = next(iter(DataLoader(seqs, batch_size=len(seqs), collate_fn=pad_collate)))
    return {"default_error": error, "padded": tuple(map(tuple, padded.tolist())),
            "mask": tuple(map(tuple, mask.tolist())), "shape": tuple(padded.shape),
            "padding_fraction": 1 - mask.sum().item() / mask.numel()}


@entry("5, 3, 8, 2")
def pad_batch(lengths_text: str) -> PadResult:
    """pad_both for the visitor's lengths, with the code that ran."""
    lengths = parse_lengths(lengths_text)
    code = script(make_sequences, pad_collate, pad_both, imports=IMPORTS, settings={"lengths": lengths},
                  run=print_each("pad_both(lengths)"))
    return PadResult(lengths, **pad_both(lengths), code=code)


IMPORTS = """import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader"""


def corpus_lengths(n: int, seed: int) -> list[int]:
    """Skewed lengths like real text: many short sequences, a long tail (log-normal, clipped to 1..512)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.exp(torch.randn(n, generator=g) * 0.8 + 3.5).round().clamp(1, 512)
    return [int(v) for v in lengths.tolist()]


def shuffled_vs_bucketed(sequences: int, batch_size: int, seed: int) -> dict:
    """Padding fraction measured on real padded batches: shuffled batches vs batches of sorted lengths."""
    lengths = corpus_lengths(sequences, seed)
    seqs = make_sequences(lengths)
    g = torch.Generator().manual_seed(seed)
    shuffled = DataLoader(seqs, batch_size=batch_size, shuffle=True, generator=g, collate_fn=pad_collate)
    random_pad, random_max = _padding(shuffled)
    order = sorted(range(sequences), key=lengths.__getitem__)
    buckets = [order[i:i + batch_size] for i in range(0, sequences, batch_size)]
    bucket_order = torch.randperm(len(buckets), generator=g).tolist()  # shuffle batches, not samples
    bucketed = DataLoader(seqs, batch_sampler=[buckets[i] for i in bucket_order], collate_fn=pad_collate)
    bucket_pad, bucket_max = _padding(bucketed)
    return {"random_padding": random_pad, "bucketed_padding": bucket_pad, "random_max_lengths": random_max,
            "bucketed_max_lengths": bucket_max}


@entry(64, 8, 2)
def bucketing(sequences: int, batch_size: int, seed: int = 0) -> BucketResult:
    """shuffled_vs_bucketed at the visitor's settings, with the code that ran."""
    if not 16 <= sequences <= MAX_CORPUS:
        raise InputError(f"Sequences must be between 16 and {MAX_CORPUS}; got {sequences}.")
    if not 2 <= batch_size <= 128:
        raise InputError(f"Batch size must be between 2 and 128; got {batch_size}.")
    code = script(corpus_lengths, make_sequences, pad_collate, _padding, shuffled_vs_bucketed, imports=IMPORTS,
                  settings={"sequences": sequences, "batch_size": batch_size, "seed": seed},
                  run=print_each("shuffled_vs_bucketed(sequences, batch_size, seed)"))
    return BucketResult(sequences, batch_size, **shuffled_vs_bucketed(sequences, batch_size, seed), code=code)


def _padding(loader) -> tuple[float, tuple[int, ...]]:
    real = padded = 0
    widths = []
    for batch, mask in loader:
        real += int(mask.sum())
        padded += batch.numel()
        widths.append(batch.shape[1])
    return 1 - real / padded, tuple(widths)
