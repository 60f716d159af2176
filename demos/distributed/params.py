"""Parameters of the distributed demos: their limits, the choices the page offers, and their validation."""

from demos.distributed.launcher import MAX_WORLD, MIN_WORLD
from demos.errors import InputError, quoted
from demos.parsing import parse_int, parse_number

# name: (low, high) for whole-number parameters of each demo
LIMITS = {
    "length": (1, 6), "ring_numel": (1, 1_000_000), "seed": (0, 9999), "layers": (1, 6), "width": (2, 256),
    "per_rank": (2, 32), "micro_batches": (1, 8), "dataset": (1, 64), "d_in": (2, 256), "d_out": (2, 256),
    "batch": (1, 16),
}
BUCKET_MB = (0.001, 25.0)
DEMO_PARAMS = {
    "env": (),
    "collectives": ("length", "ring_numel", "seed"),
    "ddp": ("layers", "width", "per_rank", "bucket_cap_mb", "micro_batches", "head_first", "seed"),
    "fsdp": ("layers", "width", "per_rank", "seed"),
    "tensor_parallel": ("d_in", "d_out", "batch", "seed"),
    "sampler": ("dataset", "shuffle", "drop_last", "seed"),
}
DDP_ITERATIONS = 3
FLAGS = ("head_first", "shuffle", "drop_last")
LABELS = {"length": "Elements per rank", "ring_numel": "Ring message size", "seed": "Seed", "layers": "Layers",
          "width": "Width", "per_rank": "Samples per rank", "micro_batches": "Micro-batches",
          "dataset": "Dataset size", "d_in": "Input features", "d_out": "Output features", "batch": "Batch"}


def whole(name: str, value) -> int:
    low, high = LIMITS[name]
    return parse_int(str(value), LABELS[name], low, high)


def feature_choices(world: int) -> tuple[int, ...]:
    """Tensor-parallel feature counts each rank can hold an equal share of: the multiples of the world size."""
    low, high = LIMITS["d_in"]
    return tuple(n for n in range(low, high + 1) if n % world == 0)


def micro_batch_choices(per_rank: int) -> tuple[int, ...]:
    """DDP micro-batch counts that give every micro-batch at least one sample."""
    low, high = LIMITS["micro_batches"]
    return tuple(range(low, min(high, per_rank) + 1))


def nearest_choice(choices: tuple[int, ...], wanted: int) -> int:
    """The largest choice not above `wanted`, else the smallest choice."""
    return max((c for c in choices if c <= wanted), default=choices[0])


def validate_world(world_size) -> int:
    return parse_int(str(world_size), "World size", MIN_WORLD, MAX_WORLD)


def validate_params(demo: str, world: int, raw: dict) -> dict:
    """Check every parameter of a demo against its limit; return them as plain JSON values."""
    if demo not in DEMO_PARAMS:
        raise InputError(f"Unknown demo {quoted(demo)}; choose one of {', '.join(DEMO_PARAMS)}.")
    p = {}
    for name in DEMO_PARAMS[demo]:
        if name not in raw:
            raise InputError(f"The {demo} demo needs the parameter {quoted(name)}.")
        value = raw[name]
        if name == "bucket_cap_mb":
            mb = parse_number(str(value), "bucket_cap_mb")
            if not BUCKET_MB[0] <= mb <= BUCKET_MB[1]:
                raise InputError(f"bucket_cap_mb: {quoted(value)} is out of range; it must be from {BUCKET_MB[0]} "
                                 f"to {BUCKET_MB[1]} (MiB, as DDP reads it).")
            p[name] = mb
        elif name in FLAGS:
            p[name] = bool(value)
        else:
            p[name] = whole(name, value)
    if demo == "ddp":
        if p["micro_batches"] > p["per_rank"]:
            raise InputError(f"Micro-batches: {p['micro_batches']} is more than the {p['per_rank']} samples per rank, "
                             "so some micro-batch would be empty.")
        p["iterations"] = DDP_ITERATIONS
    if demo == "tensor_parallel":
        for name in ("d_in", "d_out"):
            if p[name] % world:
                raise InputError(f"{LABELS[name]}: {p[name]} does not split into {world} equal shards; use a "
                                 f"multiple of {world}.")
    return p


def params_from_file(demo: str, world: int, raw: dict) -> dict:
    """A file's parameters: JSON types as the workers wrote them, then the same limits as a live run."""
    for name in DEMO_PARAMS[demo]:
        value = raw.get(name)
        if name in FLAGS:
            good, kind = isinstance(value, bool), "true or false"
        elif name == "bucket_cap_mb":
            good, kind = isinstance(value, int | float) and not isinstance(value, bool), "a number"
        else:
            good, kind = isinstance(value, int) and not isinstance(value, bool), "a whole number"
        if not good:
            raise InputError(f"The result file's params.{name} must be {kind}.")
    return validate_params(demo, world, raw)
