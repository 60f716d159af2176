"""Every parser of visitor text in demos/: any text is parsed or raises InputError, and the message is clean.

Clean: one sentence, no doubled word, no "1 shapes were given", and the visitor's text only inside a code span
(demos.errors.quoted), so markdown never eats it. The parsers are discovered: every module-level function named
parse_* in demos/ must be listed here, so a new parser cannot skip these properties.
"""

import importlib
import inspect
import pkgutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import demos
from demos.autograd.accumulate import default_micro_batches, micro_batch_choices, micro_batches
from demos.autograd.expr import parse_expression, parse_leaves
from demos.data.collate import parse_lengths
from demos.data.samplers import parse_class_sizes
from demos.debugging.repro import parse_seed
from demos.distributed.params import feature_choices, validate_params
from demos.distributed.params import micro_batch_choices as ddp_micro_choices
from demos.errors import InputError
from demos.gradient_flow.clipping import parse_lr
from demos.home import softmax_temperature
from demos.memory.cache_demo import parse_script
from demos.memory.compiling import parse_shapes as compile_shapes
from demos.modules.inputs import parse_channels, parse_head_names, parse_hook_value, parse_lrs
from demos.parsing import parse_int, parse_number, parse_numbers, parse_shape
from demos.tensors import shape_grammar
from demos.tensors.broadcasting import parse_index, parse_shapes
from demos.tensors.einsum import parse_equation
from demos.tensors.einsum import parse_shapes as einsum_shapes
from demos.tensors.layout import parse_base, parse_chain
from demos.training.amp import dtype_ranges, parse_spikes
from demos.training.losses import parse_logits
from tests.messages import check_message

# qualified name (for parse_* functions) or a description -> a call of the parser on one text, as its page sends it
PARSERS = {
    "demos.parsing.parse_shape": lambda t: parse_shape(t, field="Shape"),
    "demos.parsing.parse_int": lambda t: parse_int(t, "Seed", 0, 99),
    "demos.parsing.parse_number": lambda t: parse_number(t, "Factor"),
    "demos.parsing.parse_numbers": lambda t: parse_numbers(t, "Logits", 2, 12),
    "demos.autograd.expr.parse_expression": parse_expression,
    "demos.autograd.expr.parse_leaves": parse_leaves,
    "demos.data.collate.parse_lengths": parse_lengths,
    "demos.data.samplers.parse_class_sizes": parse_class_sizes,
    "demos.debugging.repro.parse_seed": parse_seed,
    "demos.gradient_flow.clipping.parse_lr": parse_lr,
    "demos.memory.cache_demo.parse_script": parse_script,
    "demos.memory.compiling.parse_shapes": compile_shapes,
    "demos.modules.inputs.parse_channels": parse_channels,
    "demos.modules.inputs.parse_head_names": parse_head_names,
    "demos.modules.inputs.parse_lrs": parse_lrs,
    "demos.modules.inputs.parse_hook_value": lambda t: parse_hook_value(t, "scale"),
    "hook threshold": lambda t: parse_hook_value(t, "clip"),
    "demos.tensors.broadcasting.parse_shapes": lambda t: parse_shapes((t, "3, 1", "")),
    "demos.tensors.broadcasting.parse_index": lambda t: parse_index(t, (2, 3, 4)),
    "demos.tensors.einsum.parse_equation": parse_equation,
    "demos.tensors.einsum.parse_shapes": einsum_shapes,
    "demos.tensors.layout.parse_base": parse_base,
    "demos.tensors.layout.parse_chain": parse_chain,
    "demos.tensors.shape_grammar.parse_expression": shape_grammar.parse_expression,
    "demos.tensors.shape_grammar.parse_tensors": shape_grammar.parse_tensors,
    "demos.training.amp.parse_spikes": lambda t: parse_spikes(t, 80),
    "demos.training.losses.parse_logits": parse_logits,
    "values to cast": dtype_ranges,
    "home logits": lambda t: softmax_temperature(t, 0.5),
    "ring message size": lambda t: validate_params("collectives", 2, {"length": 4, "ring_numel": t, "seed": 0}),
    "bucket_cap_mb": lambda t: validate_params("ddp", 2, {"layers": 2, "width": 8, "per_rank": 4,
                                                          "bucket_cap_mb": t, "micro_batches": 1,
                                                          "head_first": False, "seed": 0}),
}
OTHER_OWNERS = {"demos.quiz", "demos.tracker", "demos.distributed.results"}  # tested with their own pages

TEXT = (st.text(max_size=80)
        | st.from_regex(r"[\d\s,;:()\[\]._*`<>#x+e-]{0,40}", fullmatch=True)
        | st.sampled_from(["__import__('os')", "![t](http://x)", "[a](http://b)", "**bold**", "`x`", "3,,4",
                           "2, (3, 4)", "(2, 3]", "99999999,0,0", "1e39, 1", "nan", "-inf", "", " ", ";", ",",
                           "a = 40 MiB; del a", "x: 3,,4 grad", "sum(x) / 0"]))


def discovered_parsers() -> set[str]:
    """Every module-level parse_* function in demos/, as 'module.function'."""
    found = set()
    for info in pkgutil.walk_packages(demos.__path__, "demos."):
        if info.name in OTHER_OWNERS:
            continue
        module = importlib.import_module(info.name)
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("parse_") and fn.__module__ == info.name:
                found.add(f"{info.name}.{name}")
    return found


def test_every_parser_in_demos_is_fuzzed_here():
    missing = discovered_parsers() - set(PARSERS)
    assert not missing, f"add these parsers to PARSERS: {sorted(missing)}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXT)
@pytest.mark.parametrize("name", sorted(PARSERS))
def test_any_text_is_parsed_or_a_clean_input_error(name, text):
    try:
        PARSERS[name](text)
    except InputError as err:
        check_message(str(err), text)


@pytest.mark.parametrize("name, text, words", [
    ("demos.debugging.repro.parse_seed", "99999999999", "Seed: `99999999999` is out of range"),
    ("demos.tensors.broadcasting.parse_index", "99999999,0,0", "`99999999` is out of range for dim 0"),
    ("demos.parsing.parse_shape", "3,,4", "an entry between commas is empty"),
    ("demos.modules.inputs.parse_lrs", "0.1", "Learning rates: needs exactly 2 numbers; got 1."),
    ("demos.parsing.parse_number", "__import__('os')", "`__import__('os')`"),
    ("demos.modules.inputs.parse_hook_value", "1e3", "Factor: 1000 is out of range"),
    ("hook threshold", "0", "Threshold: 0 is out of range"),
    ("ring message size", "2000000", "Ring message size: `2000000` is out of range"),
    ("bucket_cap_mb", "30", "bucket_cap_mb: `30` is out of range"),
    ("demos.autograd.expr.parse_expression", "x )", "the bracket `)` at position 3 was never opened"),
])
def test_the_reported_messages(name, text, words):
    with pytest.raises(InputError) as err:
        PARSERS[name](text)
    assert words in str(err.value)


# ---- constrained choices: a page offers exactly the values its validator accepts -------------------------------

def _accepted(call) -> bool:
    try:
        call()
    except InputError:
        return False
    return True


@pytest.mark.parametrize("world", [2, 3, 4])
def test_tensor_parallel_feature_choices_are_what_validation_accepts(world):
    def tp(n):
        return lambda: validate_params("tensor_parallel", world, {"d_in": n, "d_out": 8 - 8 % world or world,
                                                                  "batch": 2, "seed": 0})
    offered = set(feature_choices(world))
    assert offered == {n for n in range(2, 257) if _accepted(tp(n))}


@pytest.mark.parametrize("per_rank", [2, 3, 8, 32])
def test_ddp_micro_batch_choices_are_what_validation_accepts(per_rank):
    def ddp(m):
        return lambda: validate_params("ddp", 2, {"layers": 2, "width": 8, "per_rank": per_rank, "bucket_cap_mb": 1,
                                                  "micro_batches": m, "head_first": False, "seed": 0})
    assert set(ddp_micro_choices(per_rank)) == {m for m in range(1, 9) if _accepted(ddp(m))}


@pytest.mark.parametrize("batch", [2, 7, 30, 32, 256])
def test_micro_batch_k_choices_are_what_the_demo_accepts(batch):
    offered = set(micro_batch_choices(batch))
    assert offered == {k for k in range(1, 17) if _accepted(lambda k=k: micro_batches(batch, k))}
    assert default_micro_batches(batch) in offered
