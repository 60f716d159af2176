"""The one list of pages and their views: navigation, the home page's topic map, the tracker, the practice
catalog, the tests and the benchmark all read it.

A topic is registered only when its page file exists, so adding a page is: write the file, and make sure its
entry below is filled in. A page's sections (its URL-bound tab sets and their labels) are declared here and the
page builds its tabs from them, so every test that walks a page's views reads the same list. No streamlit
import here (it sits below pages/ui and pages/shell): tests read this without a server.
"""

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SECTIONS = ("Start", "Fundamentals", "Training", "Performance", "Production", "Scale", "Debugging")


@dataclass(frozen=True)
class TabSet:
    """A URL-bound tab set: its query parameter, its labels in order, and the open tab that holds it, if any."""

    key: str
    labels: tuple[str, ...]
    inside: tuple[str, str] | None = None  # (key, label) of the enclosing tab; None at the page's top level


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
    engine: str = ""  # the demos package (or module) that computes the page
    tab_sets: tuple[TabSet, ...] = ()

    @property
    def exists(self) -> bool:
        return (ROOT / self.file).is_file()

    def tabs(self, key: str) -> tuple[str, ...]:
        """The labels of the tab set bound to `key`, in the order the page shows them."""
        return next(s.labels for s in self.tab_sets if s.key == key)

    def sections(self) -> list[dict[str, str]]:
        """One query per distinct section a visitor can open, in the page's order: every tab, except that a tab
        holding a tab set of its own opens once per tab of that set; a page without tabs is one section."""
        def expand(tab_set: TabSet, outer: dict[str, str]) -> list[dict[str, str]]:
            out = []
            for label in tab_set.labels:
                query = {**outer, tab_set.key: label}
                inner = [s for s in self.tab_sets if s.inside == (tab_set.key, label)]
                out += [q for s in inner for q in expand(s, query)] or [query]
            return out

        return [q for s in self.tab_sets if s.inside is None for q in expand(s, {})] or [{}]

    def views(self) -> list[dict[str, str]]:
        """The page at its defaults (no query), then each of its sections when it has tabs."""
        return [{}] + (self.sections() if self.tab_sets else [])

    def undeclared_tabs(self, query: dict[str, str]) -> list[str]:
        """The `key=label` pairs of a query that name a tab this page does not declare (a tab key or a label)."""
        declared = {s.key: s.labels for s in self.tab_sets}
        return [f"{k}={v}" for k, v in query.items()
                if (k in declared and v not in declared[k]) or (k.endswith("_tab") and k not in declared)]

    def tab_sets_in(self, query: dict[str, str]) -> list[TabSet]:
        """The tab sets the page draws when opened with `query` (a tab missing from the query is its first)."""
        def is_open(key: str, label: str) -> bool:
            return query.get(key, self.tabs(key)[0]) == label

        return [s for s in self.tab_sets if s.inside is None or is_open(*s.inside)]


HOME = Topic(
    slug="home",
    file="pages/home.py",
    title="Home",
    icon=":material/home:",
    section="Start",
    summary="What this is, the topic map, the study tracker.",
    question="",
    charts=1,
    engine="demos.home",
)

TOPICS = (
    Topic(
        "practice", "pages/practice.py", "Practice", ":material/quiz:", "Start",
        "Drills and mock interviews of torch-graded questions, generated fresh from a seed.",
        "Can you predict what torch returns, under time pressure?",
        charts=0,
        engine="demos.practice",
    ),
    Topic(
        "tensors", "pages/tensors.py", "Tensors", ":material/grid_on:", "Fundamentals",
        "Broadcasting, strides and views, dtype promotion, einsum, devices.",
        "What shape does this broadcast to, and does this reshape copy?",
        ("Broadcasting rules", "Strides, views and contiguity", "view vs reshape", "Type promotion",
         "einsum", "Device placement"),
        charts=2,
        engine="demos.tensors",
        tab_sets=(TabSet("tensors_tab",
                         ("Broadcasting", "Memory layout", "dtypes", "einsum", "Devices", "Shape lab")),),
    ),
    Topic(
        "autograd", "pages/autograd.py", "Autograd", ":material/account_tree:", "Fundamentals",
        "The graph torch records, backward step by step, no_grad vs detach, custom Functions.",
        "What is the difference between no_grad and detach?",
        ("Dynamic graph and grad_fn", "Leaves and retain_grad", "no_grad / detach / inference_mode",
         "Custom autograd.Function", "Gradient accumulation", "Higher-order gradients"),
        charts=2,
        engine="demos.autograd",
        tab_sets=(
            TabSet("ag_tab", ("Graph", "Backward", "no_grad & detach", "Custom Functions", "Accumulation")),
            TabSet("ag_custom", ("Straight-through estimator for rounding", "Numerically stable log-sum-exp",
                                 "Swish with ctx.save_for_backward"), inside=("ag_tab", "Custom Functions")),
        ),
    ),
    Topic(
        "modules", "pages/modules.py", "Modules & hooks", ":material/widgets:", "Fundamentals",
        "Parameters vs buffers, hooks and what they see, freezing, weight sharing, containers.",
        "What is the difference between nn.Parameter and register_buffer?",
        ("Parameters vs buffers", "Forward and backward hooks", "Freezing layers", "Weight tying",
         "ModuleList / ModuleDict / Sequential"),
        engine="demos.modules",
        tab_sets=(TabSet("modules_tab", ("Parameters & buffers", "Hooks", "Freezing", "Weight sharing",
                                          "Containers")),),
    ),
    Topic(
        "gradient-flow", "pages/gradient-flow.py", "Gradient flow", ":material/show_chart:", "Fundamentals",
        "Vanishing and exploding gradients across depth, clipping, dead ReLUs.",
        "Why do gradients vanish in deep networks, and how do you fix it?",
        ("Vanishing gradients", "Exploding gradients", "Initialization", "Normalization and residuals",
         "Gradient clipping", "Dead ReLUs"),
        charts=7,
        engine="demos.gradient_flow",
    ),
    Topic(
        "transformers", "pages/transformers.py", "Attention & transformers", ":material/psychology:", "Fundamentals",
        "Attention step by step, heads, positions, norms, the block, embeddings, dropout, RNNs, a model that learns.",
        "Implement scaled dot-product attention. Why divide by the square root of d_k?",
        ("Scaled dot-product attention", "Attention masks", "Multi-head attention", "Positional encodings",
         "LayerNorm, BatchNorm and RMSNorm", "Pre-norm vs post-norm", "Embeddings", "Dropout",
         "RNNs, padding and packing", "Implementing it from scratch"),
        charts=4,  # the Attention tab's four parts: the steps, the scaling, the masked rows, the scores' memory
        engine="demos.transformers",
        tab_sets=(TabSet("tf_tab", ("Attention", "Multi-head", "Positions", "Norms & residuals", "The block",
                                     "Embeddings & dropout", "Sequences", "Tiny model", "From scratch")),),
    ),
    Topic(
        "training-loop", "pages/training-loop.py", "Training loop", ":material/replay:", "Training",
        "The exact order of a step, its mistakes, optimizers, schedulers, losses, AMP, resume.",
        "Walk me through one training step in order. What breaks if you skip zero_grad?",
        ("Order of a step", "Common loop mistakes", "Optimizers", "LR schedulers", "Loss functions",
         "Mixed precision", "Checkpoint and exact resume"),
        charts=2,
        engine="demos.training",
        tab_sets=(TabSet("tl_tab", ("One step", "Mistakes", "Optimizers", "Schedulers", "Losses",
                                     "Mixed precision", "Resume")),),
    ),
    Topic(
        "data-loading", "pages/data-loading.py", "Data loading", ":material/conveyor_belt:", "Training",
        "Real DataLoader worker timelines, IterableDataset sharding, samplers, collate_fn, pinning.",
        "Your GPU sits idle half the time. How do you find and fix the input bottleneck?",
        ("Workers and prefetching", "persistent_workers", "IterableDataset sharding", "Samplers",
         "collate_fn and padding", "pin_memory"),
        charts=2,  # the Workers tab's two default runs: the worker Gantt and the two epochs
        engine="demos.data",
        tab_sets=(TabSet("dl_tab", ("Workers & epochs", "IterableDataset", "Samplers", "collate_fn & pin_memory")),),
    ),
    Topic(
        "memory", "pages/memory.py", "Memory & speed", ":material/memory:", "Performance",
        "Memory over a training step, the caching allocator, OOM, transfers and streams, torch.compile.",
        "Where does the memory of a training step go, and why is reserved larger than allocated?",
        ("Memory by category", "Caching allocator", "OOM and fragmentation", "Pinned memory and streams",
         "Synchronization", "torch.compile and graph breaks"),
        charts=2,
        engine="demos.memory",
        tab_sets=(TabSet("mem_tab", ("Training step", "Caching allocator", "Streams & transfers", "torch.compile")),),
    ),
    Topic(
        "saving", "pages/saving.py", "Saving & deployment", ":material/save:", "Production",
        "state_dict, checkpoints, TorchScript vs torch.export, ONNX, quantization.",
        "What do you save to resume training exactly, and how do you export for serving?",
        ("state_dict", "Checkpoint design", "TorchScript vs torch.export", "ONNX export", "Quantization"),
        charts=1,
        engine="demos.saving",
        tab_sets=(TabSet("sv_tab", ("state_dict", "Checkpoints", "TorchScript vs export", "ONNX", "Quantization",
                                     "Which path?")),),
    ),
    Topic(
        "distributed", "pages/distributed.py", "Distributed", ":material/hub:", "Scale",
        "Real process groups: collectives, DDP buckets, FSDP sharding, tensor and pipeline parallel.",
        "How does DDP overlap communication with backward, and when do you need FSDP?",
        ("Collectives", "DDP buckets and overlap", "DistributedSampler", "FSDP / ZeRO",
         "Tensor and pipeline parallel", "Launching ranks"),
        charts=4,  # the Collectives tab's default run: the chosen collective, the trap's two, the ring's bytes
        engine="demos.distributed",
        tab_sets=(TabSet("dist_tab", ("Collectives", "DDP", "DistributedSampler", "FSDP & ZeRO",
                                       "Tensor & pipeline", "Launch")),),
    ),
    Topic(
        "debugging", "pages/debugging.py", "Debugging & reproducibility", ":material/bug_report:", "Debugging",
        "NaN tracing, seeds and determinism, memory leaks, unit tests for models, the profiler.",
        "Your loss becomes NaN after 1000 steps. How do you find the cause?",
        ("NaN tracing", "Reproducibility", "Memory leaks", "Unit tests for models", "Profiler"),
        engine="demos.debugging",
        tab_sets=(TabSet("dbg_tab", ("NaN tracing", "Reproducibility", "Memory leaks", "Unit tests for models",
                                      "Profiler")),),
    ),
)


def registered() -> list[Topic]:
    """Home plus every topic whose page file exists, in navigation order."""
    return [HOME] + [t for t in TOPICS if t.exists]


def by_slug(slug: str) -> Topic:
    return next(t for t in (HOME, *TOPICS) if t.slug == slug)


def by_file(file: str) -> Topic:
    """The topic of a page file, given relative to the repository root (pages/<slug>.py)."""
    return next(t for t in (HOME, *TOPICS) if t.file == file)
