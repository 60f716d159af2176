"""The memory model against a real GPU: every spec measured on an NVIDIA H200 (assets/gpu/memtruth.json, with its
provenance: GPU, driver, torch) is replayed on meta tensors here, and its predicted peak allocated is held to the
measured max_memory_allocated of the same steps in plain torch."""

import json
import statistics

from demos.memory.training import RunSpec, simulate
from tests.conftest import ROOT

TRUTH = json.loads((ROOT / "assets" / "gpu" / "memtruth.json").read_text())


def test_the_measurements_say_where_they_come_from():
    p = TRUTH["provenance"]
    assert p["gpu"] == TRUTH["gpu"] and p["torch"] == TRUTH["torch"] and p["driver"] and p["date"]
    assert len(TRUTH["rows"]) == 33 and all("cuda_max_alloc" in row for row in TRUTH["rows"])


def test_every_measured_spec_is_predicted_within_5_percent_and_the_median_within_half_a_percent():
    errors = {}
    for i, row in enumerate(TRUTH["rows"]):
        predicted = simulate(RunSpec(**row["spec"]), "meta").predicted_peak_allocated
        errors[i] = 100 * (predicted - row["cuda_max_alloc"]) / row["cuda_max_alloc"]
    worst = max(errors, key=lambda i: abs(errors[i]))
    assert abs(errors[worst]) < 5, f"row {worst} {TRUTH['rows'][worst]['spec']}: {errors[worst]:+.2f}%"
    assert statistics.median(abs(e) for e in errors.values()) < 0.5
    autocast = [i for i, row in enumerate(TRUTH["rows"]) if "autocast" in row["spec"]["dtype"]]
    assert max(abs(errors[i]) for i in autocast) < 0.5, "autocast rows were up to 17.7% over"
