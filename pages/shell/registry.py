"""The one list of pages: navigation, the home page's topic map, the tracker and the tests all read it.

A topic is registered only when its page file exists, so adding a page is: write the file, and make
sure its entry below is filled in. No streamlit import here: tests read this without a server.
"""

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SECTIONS = ("Start", "Fundamentals", "Training", "Performance", "Production", "Scale", "Debugging")


@dataclass(frozen=True)
class Topic:
    slug: str  # url path and tracker key
    file: str  # relative to the repository root
    title: str
    icon: str
    section: str
    summary: str  # one line, shown on the topic card
    question: str  # the question interviewers ask most often about it
    concepts: tuple[str, ...] = ()  # the study tracker's checklist
    charts: int = 1  # charts the browser test expects at defaults (plotly, graphviz or Vega-Lite)

    @property
    def exists(self) -> bool:
        return (ROOT / self.file).is_file()


HOME = Topic(
    slug="home",
    file="pages/home.py",
    title="Home",
    icon=":material/home:",
    section="Start",
    summary="What this is, the topic map, the study tracker.",
    question="",
    charts=1,
)

TOPICS = (
    Topic(
        "practice", "pages/practice.py", "Practice", ":material/quiz:", "Start",
        "Drills and mock interviews of torch-graded questions, generated fresh from a seed.",
        "Can you predict what torch returns, under time pressure?",
        charts=0,
    ),
    Topic(
        "tensors", "pages/tensors.py", "Tensors", ":material/grid_on:", "Fundamentals",
        "Broadcasting, strides and views, dtype promotion, einsum, devices.",
        "What shape does this broadcast to, and does this reshape copy?",
        ("Broadcasting rules", "Strides, views and contiguity", "view vs reshape", "Type promotion",
         "einsum", "Device placement"),
        charts=2,
    ),
    Topic(
        "autograd", "pages/autograd.py", "Autograd", ":material/account_tree:", "Fundamentals",
        "The graph torch records, backward step by step, no_grad vs detach, custom Functions.",
        "What is the difference between no_grad and detach?",
        ("Dynamic graph and grad_fn", "Leaves and retain_grad", "no_grad / detach / inference_mode",
         "Custom autograd.Function", "Gradient accumulation", "Higher-order gradients"),
        charts=2,
    ),
    Topic(
        "modules", "pages/modules.py", "Modules & hooks", ":material/widgets:", "Fundamentals",
        "Parameters vs buffers, hooks and what they see, freezing, weight sharing, containers.",
        "What is the difference between nn.Parameter and register_buffer?",
        ("Parameters vs buffers", "Forward and backward hooks", "Freezing layers", "Weight tying",
         "ModuleList / ModuleDict / Sequential"),
    ),
    Topic(
        "gradient-flow", "pages/gradient-flow.py", "Gradient flow", ":material/show_chart:", "Fundamentals",
        "Vanishing and exploding gradients across depth, clipping, dead ReLUs.",
        "Why do gradients vanish in deep networks, and how do you fix it?",
        ("Vanishing gradients", "Exploding gradients", "Initialization", "Normalization and residuals",
         "Gradient clipping", "Dead ReLUs"),
        charts=7,
    ),
    Topic(
        "training-loop", "pages/training-loop.py", "Training loop", ":material/replay:", "Training",
        "The exact order of a step, its mistakes, optimizers, schedulers, losses, AMP, resume.",
        "Walk me through one training step in order. What breaks if you skip zero_grad?",
        ("Order of a step", "Common loop mistakes", "Optimizers", "LR schedulers", "Loss functions",
         "Mixed precision", "Checkpoint and exact resume"),
        charts=2,
    ),
    Topic(
        "data-loading", "pages/data-loading.py", "Data loading", ":material/conveyor_belt:", "Training",
        "Real DataLoader worker timelines, IterableDataset sharding, samplers, collate_fn, pinning.",
        "Your GPU sits idle half the time. How do you find and fix the input bottleneck?",
        ("Workers and prefetching", "persistent_workers", "IterableDataset sharding", "Samplers",
         "collate_fn and padding", "pin_memory"),
        charts=5,
    ),
    Topic(
        "memory", "pages/memory.py", "Memory & speed", ":material/memory:", "Performance",
        "Memory over a training step, the caching allocator, OOM, transfers and streams, torch.compile.",
        "Where does the memory of a training step go, and why is reserved larger than allocated?",
        ("Memory by category", "Caching allocator", "OOM and fragmentation", "Pinned memory and streams",
         "Synchronization", "torch.compile and graph breaks"),
        charts=2,
    ),
    Topic(
        "saving", "pages/saving.py", "Saving & deployment", ":material/save:", "Production",
        "state_dict, checkpoints, TorchScript vs torch.export, ONNX, quantization.",
        "What do you save to resume training exactly, and how do you export for serving?",
        ("state_dict", "Checkpoint design", "TorchScript vs torch.export", "ONNX export", "Quantization"),
        charts=1,
    ),
    Topic(
        "distributed", "pages/distributed.py", "Distributed", ":material/hub:", "Scale",
        "Real process groups: collectives, DDP buckets, FSDP sharding, tensor and pipeline parallel.",
        "How does DDP overlap communication with backward, and when do you need FSDP?",
        ("Collectives", "DDP buckets and overlap", "DistributedSampler", "FSDP / ZeRO",
         "Tensor and pipeline parallel", "Launching ranks"),
        charts=0,  # the Collectives tab draws once its button has started the ranks
    ),
    Topic(
        "debugging", "pages/debugging.py", "Debugging & reproducibility", ":material/bug_report:", "Debugging",
        "NaN tracing, seeds and determinism, memory leaks, unit tests for models, the profiler.",
        "Your loss becomes NaN after 1000 steps. How do you find the cause?",
        ("NaN tracing", "Reproducibility", "Memory leaks", "Unit tests for models", "Profiler"),
    ),
)


def registered() -> list[Topic]:
    """Home plus every topic whose page file exists, in navigation order."""
    return [HOME] + [t for t in TOPICS if t.exists]


def by_slug(slug: str) -> Topic:
    return next(t for t in (HOME, *TOPICS) if t.slug == slug)
