"""Data loading: each snippet, linted and run alone, prints the numbers of the figure its entry point drew; the
recording the Workers tab opens on was made by today's code and has the shape the demos return today."""

import json

from demos.data import collate, pinning, recording, samplers, streams, timeline
from tests.snippets import checks, fields, linted


def loader_lines(out: str, runs) -> None:
    """Each run's line names its configuration and the samples it loaded (the rest are timings)."""
    for r in runs:
        assert f"{r.config.label}: {len(r.loaded)} samples in " in out


@checks(timeline.compare)
def dataloader_timeline(r, run):
    loader_lines(run(linted(r.code)), (r.a, r.b))


@checks(timeline.epoch_boundaries)
def persistent_workers(r, run):
    loader_lines(run(linted(r.code)), (r.off, r.on))
    assert "persistent_workers=True" in r.code and r.on.config.persistent_workers


@checks(streams.stream_demo)
def iterable_sharding(r, run):
    shown = fields(run(linted(r.code)))
    assert shown["naive"] == str(r.naive) and shown["sharded"] == str(r.sharded)
    assert r.naive_duplicates == 6 and r.sharded_duplicates == 0


@checks(samplers.sampler_orders)
def sampler_orders(r, run):
    shown = fields(run(linted(r.code)))
    assert shown["orders"] == str(r.orders) and shown["batches"] == str(r.batches)


@checks(samplers.weighted_sampling)
def weighted_sampler(r, run):
    shown = fields(run(linted(r.code)))
    for name in ("drawn_plain", "drawn_weighted", "batches_with_rarest", "unique_fraction"):
        assert shown[name] == str(getattr(r, name)), name


@checks(samplers.distributed_partition)
def distributed_sampler(r, run):
    shown = fields(run(linted(r.code)))
    assert shown["epochs"] == str(r.epochs) and shown["padding"] == str(r.padding)


@checks(collate.pad_batch)
def pad_collate(r, run):
    shown = fields(run(linted(r.code)))
    for name in ("default_error", "padded", "mask", "shape", "padding_fraction"):
        assert shown[name] == str(getattr(r, name)), name


@checks(collate.bucketing)
def bucketing(r, run):
    shown = fields(run(linted(r.code)))
    for name in ("random_padding", "bucketed_padding", "random_max_lengths", "bucketed_max_lengths"):
        assert shown[name] == str(getattr(r, name)), name


@checks(pinning.pin_demo)
def pinned_copy(r, run):
    shown = fields(run(linted(r.code)))
    for name in ("accelerator", "pin_error", "loader_warning", "loader_pinned"):  # the rest are timings
        assert shown[name] == str(getattr(r, name)), name


@checks(pinning.d2h_demo)
def device_to_host_trap(view, run):
    out = run(linted(view.code))
    if view.trap is None:  # no CUDA: the trap says so rather than faking it
        assert out.startswith("No CUDA GPU here")
    else:
        assert f"expected={view.trap.expected}" in out


def shape(value):
    """The structure of a JSON value: key names and value types, each list as the distinct shapes of its items."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted({json.dumps(shape(v)) for v in value})
    return type(value).__name__


@checks(recording.default_runs)
def recorded_defaults(live, run):
    """`live` ran both defaults here (the example passes no recording); the shipped recording must be of the same
    shape, show the same snippets and have been made by the same code (its fingerprint). The snippets themselves are
    the ones the two checks above run, at other settings: running them at the defaults again would only repeat
    eight more seconds of DataLoaders."""
    shipped = json.loads(recording.RECORDING.read_text())
    written = json.loads(recording.dumps(recording.to_json(live)))  # what recording it would write today
    assert shape(shipped) == shape(written), "record again: python -m demos.data.recording"
    recorded = recording.default_runs()
    for now, then in ((live.comparison, recorded.comparison), (live.epochs, recorded.epochs)):
        assert then.code == linted(now.code), "the defaults changed since the recording: record again"
    assert recorded.provenance["code_sha256"] == recording.code_fingerprint(live.comparison.code), (
        "the code that measures changed since the recording: record again with python -m demos.data.recording")
