"""Predict-then-run questions for the Tensors page: torch decides every answer when the snippet runs."""

import torch

from demos.quiz import Question


def _broadcast_shape():
    a = torch.ones(8, 1, 6, 1)
    b = torch.ones(7, 1, 5)
    return (a + b).shape


def _sum_shape():
    x = torch.ones(2, 3, 4)
    return x.sum(dim=1).shape


def _reshape_copies():
    x = torch.arange(6).reshape(2, 3)
    y = x.T.reshape(6)
    return y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def _transpose_stride():
    x = torch.zeros(3, 4)
    return x.T.stride()


def _expand_bytes():
    row = torch.zeros(1, 1000)  # float32: 4 bytes per element
    big = row.expand(1000, 1000)
    return big.untyped_storage().nbytes()


def _zero_dim_promotion():
    x = torch.ones(3, dtype=torch.float16)
    scale = torch.tensor(2.5, dtype=torch.float64)  # 0-dim
    return (x * scale).dtype


def _int_plus_half():
    x = torch.tensor([1, 2, 3])
    return (x + 0.5).dtype


def _uint8_wrap():
    x = torch.tensor([250], dtype=torch.uint8)
    return (x + 10).item()


def _bf16_step():
    one = torch.tensor(1.0, dtype=torch.bfloat16)
    return (one + 1e-3).item()


def _attention_shape():
    q = torch.ones(2, 4, 10, 16)
    k = torch.ones(2, 4, 12, 16)
    return torch.einsum("bhqd,bhkd->bhqk", q, k).shape


def _einsum_trace():
    m = torch.arange(9.0).reshape(3, 3)
    return torch.einsum("ii->", m).item()


def _to_returns_self():
    x = torch.zeros(3)
    return x.to(torch.float32) is x


def _advanced_index_write():
    x = torch.zeros(5)
    x[torch.tensor([1, 3])][0] = 5.0
    return x.sum().item()


def _squeeze_batch_of_one():
    x = torch.randn(1, 1, 4)  # a batch of one
    return x.squeeze().shape


def _bmm_batch_of_one():
    a = torch.ones(1, 3, 4)
    b = torch.ones(8, 4, 5)
    try:
        return torch.bmm(a, b).shape
    except RuntimeError as err:
        return type(err)


QUESTIONS = (
    Question("broadcast", "What is the shape of a + b for (8, 1, 6, 1) and (7, 1, 5)?", _broadcast_shape,
             "Align from the right: (8, 1, 6, 1) and (_, 7, 1, 5). Each 1 stretches and the missing dim is "
             "prepended as 1, giving (8, 7, 6, 5).", kind="shape"),
    Question("sum_shape", "What is the shape of x.sum(dim=1) for x of shape (2, 3, 4)?", _sum_shape,
             "Reducing a dim removes it unless keepdim=True.", kind="shape"),
    Question("reshape_copies", "Does y = x.T.reshape(6) share x's storage?", _reshape_copies,
             "x.T has strides (1, 3): no single stride walks it in row-major order, so reshape must copy. "
             "On a contiguous x, the same reshape would be a view.", choices=("True", "False")),
    Question("t_stride", "What are the strides of x.T for a contiguous x of shape (3, 4)?", _transpose_stride,
             "Transposing swaps the strides: (4, 1) becomes (1, 4). No data moves.",
             choices=("(4, 1)", "(1, 4)", "(1, 3)", "(3, 1)")),
    Question("expand_bytes", "How many bytes does the storage of a (1000, 1000) float32 expand of a (1, 1000) row "
             "hold?", _expand_bytes,
             "expand sets stride 0 on the stretched dim: the storage is still the one row, 1000 x 4 bytes.",
             kind="number"),
    Question("zero_dim", "float16 tensor times a 0-dim float64 tensor: what dtype?", _zero_dim_promotion,
             "A 0-dim tensor of the same category (float) does not promote a dimensioned operand: float16 stays.",
             choices=("torch.float16", "torch.float32", "torch.float64")),
    Question("int_plus_half", "What dtype does an int64 tensor plus 0.5 have?", _int_plus_half,
             "A Python float lifts an integer tensor to the default float dtype, float32, not float64.",
             choices=("torch.int64", "torch.float32", "torch.float64")),
    Question("uint8", "What is uint8 250 + 10?", _uint8_wrap,
             "uint8 arithmetic wraps modulo 256: 260 - 256 = 4, with no warning.", kind="number"),
    Question("bf16", "What is 1 + 1e-3 in bfloat16?", _bf16_step,
             "bfloat16 keeps 8 significant bits: the spacing after 1.0 is 2^-7 = 0.0078, so 1.001 rounds to 1.0.",
             kind="number", exact=True),
    Question("attention", "What shape does einsum('bhqd,bhkd->bhqk') give for q (2, 4, 10, 16), k (2, 4, 12, 16)?",
             _attention_shape, "b and h are batch indices, q and k are free, d is contracted: (2, 4, 10, 12).",
             kind="shape"),
    Question("trace", "What is einsum('ii->') of arange(9.).reshape(3, 3)?", _einsum_trace,
             "A repeated index reads the diagonal (0, 4, 8); leaving it out of the output sums it: 12.",
             kind="number"),
    Question("to_self", "Is x.to(torch.float32) the very same object as a float32 x?", _to_returns_self,
             "When dtype and device already match, .to() returns self: no copy is made.",
             choices=("True", "False")),
    Question("adv_index", "x = zeros(5); x[torch.tensor([1, 3])][0] = 5. What is x.sum()?", _advanced_index_write,
             "0: indexing with a tensor returns a copy, and the write went into that copy. `x[idx[0]] = 5` (one "
             "indexing call on the left of =) writes into x.", kind="number"),
    Question("bmm_batch", "torch.bmm(a, b) for a (1, 3, 4) and b (8, 4, 5): what shape, or does it raise?",
             _bmm_batch_of_one,
             "RuntimeError: bmm never broadcasts, so its batch dims must be equal (1 and 8 are not). a @ b "
             "(torch.matmul) broadcasts them and gives (8, 3, 5).", choices=("(8, 3, 5)", "(1, 3, 5)", "RuntimeError")),
    Question("squeeze_one", "x has shape (1, 1, 4): a batch of one. What shape does x.squeeze() have?",
             _squeeze_batch_of_one,
             "(4,): squeeze() drops every size-1 dim, the batch dim too. x.squeeze(1) keeps the batch: (1, 4).",
             kind="shape"),
)
