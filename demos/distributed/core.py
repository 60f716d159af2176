"""The names the Distributed page reads as `core.<name>`, each from the module that does its job.

    params       limits, choices and validation of every demo's parameters
    runs         DistRun: a live run on gloo ranks (run_demo) or a torchrun result file (from_file)
    snippets     the standalone torchrun script a run shows
    views        what each tab draws, from a run's per-rank results
    stories      the sentences beside those figures
    calculators  ZeRO bytes, trade-offs, parameter counts, byte units (no processes)
    pipeline     GPipe and 1F1B schedules

Code other than the page imports from those modules; this list goes once the page does too.
"""

from demos.distributed.calculators import (
    PRECISIONS,
    PRESETS,
    STAGE_NAMES,
    human_bytes,
    model_param_count,
    precision_note,
    tradeoff_rows,
    zero_bytes,
    zero_table,
)
from demos.distributed.params import BUCKET_MB, feature_choices, micro_batch_choices, nearest_choice, validate_params
from demos.distributed.pipeline import Schedule, pipeline_schedule
from demos.distributed.runs import DistRun, backend_note, from_file, run_demo
from demos.distributed.stories import accumulation_caption, ddp_story, fsdp_story, no_sync_trap, ring_summary
from demos.distributed.views import (
    OPS,
    bucket_cap_bytes,
    collective_view,
    ddp_view,
    env_view,
    fsdp_view,
    overlap_ms,
    ring_rows,
    sampler_view,
    tp_view,
)

__all__ = [
    "BUCKET_MB", "OPS", "PRECISIONS", "PRESETS", "STAGE_NAMES", "DistRun", "Schedule", "accumulation_caption",
    "backend_note", "bucket_cap_bytes", "collective_view", "ddp_story", "ddp_view", "env_view", "feature_choices",
    "from_file", "fsdp_story", "fsdp_view", "human_bytes", "micro_batch_choices", "model_param_count", "nearest_choice",
    "no_sync_trap", "overlap_ms", "pipeline_schedule", "precision_note", "ring_rows", "ring_summary", "run_demo",
    "sampler_view", "tp_view", "tradeoff_rows", "validate_params", "zero_bytes", "zero_table",
]
