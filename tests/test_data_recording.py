"""The recording the Workers tab opens on: what the recorder writes reads back as the runs it measured, and the
shipped file is of today's default cases with its provenance (its shape and code: tests/snippets/data.py)."""

import json

import pytest

from demos.data import recording
from demos.data.timeline import LoaderConfig, Workload, default_cases

SMALL = ((Workload(8, 5.0, 1.0, 5.0), LoaderConfig(), LoaderConfig(num_workers=2)),
         (Workload(8, 5.0, 1.0, 5.0, 50.0), LoaderConfig(num_workers=2)))
PROVENANCE = {"date", "host", "cpu", "cores", "torch", "python", "command", "code_sha256"}


def test_the_recorder_writes_what_it_measured_and_where(tmp_path, monkeypatch):
    monkeypatch.setattr(recording, "default_cases", lambda: SMALL)  # the defaults take 8-10 s of DataLoaders
    monkeypatch.setattr("os.getloadavg", lambda: (0.5, 0.5, 0.5))  # a quiet host, whatever runs beside the test
    out = tmp_path / "defaults.json"
    assert recording.main(["--out", str(out)]) == 0
    runs = recording.default_runs(str(out))
    assert set(runs.provenance) == PROVENANCE and runs.provenance["command"].endswith(f"--out {out}")
    c, e = runs.comparison, runs.epochs
    assert (c.a.workload, c.a.config, c.b.config) == SMALL[0] and (e.off.workload, e.off.config.num_workers) == (
        SMALL[1][0], 2)
    assert [len(r.loaded) for r in (c.a, c.b)] == [8, 8] and [len(r.loaded) for r in (e.off, e.on)] == [16, 16]
    assert c.verdict(c.a).startswith("Starved: without workers") and (e.setups(e.off, 1), e.setups(e.on, 1)) == (2, 0)
    again = recording.from_json(json.loads(recording.dumps(recording.to_json(runs))))
    assert again == runs, "written and read again, nothing changes"


def test_the_shipped_recording_is_of_the_pages_defaults_with_its_provenance():
    runs = recording.default_runs()
    (w, a, b), (epoch_w, epoch_c) = default_cases()
    c, e = runs.comparison, runs.epochs
    assert (c.a.workload, c.a.config, c.b.workload, c.b.config) == (w, a, w, b)
    assert (e.off.workload, e.on.workload) == (epoch_w, epoch_w)
    assert (e.off.config, e.on.config) == (epoch_c, LoaderConfig(**{**epoch_c.__dict__, "persistent_workers": True}))
    assert set(runs.provenance) == PROVENANCE and runs.provenance["command"].startswith(recording.COMMAND)
    assert c.cores == runs.provenance["cores"] and len(c.a.loaded) == len(c.b.loaded) == w.samples
    assert recording.RECORDING.stat().st_size < 100_000, "a small file"
    assert c.load_average <= c.cores, "recorded on a host no busier than its cores"
    assert c.steady_speedup(c.b) > 1.5, "at the defaults, 4 workers clearly beat loading in the main loop"


def test_a_recording_made_on_a_busy_host_is_not_written(tmp_path, monkeypatch):
    """Under a load above the host's cores workers look slower than none: such a recording would teach the opposite
    of the tab's lesson, so the recorder says why and writes nothing."""
    monkeypatch.setattr(recording, "default_cases", lambda: SMALL)
    monkeypatch.setattr("os.getloadavg", lambda: (99.0, 99.0, 99.0))  # read right after the runs
    out = tmp_path / "busy.json"
    assert recording.main(["--out", str(out)]) == 1 and not out.exists()
    assert "load average was 99.0" in recording.busy_host({"comparison": {"load_average": 99.0, "cores": 2}})


def test_a_recording_of_another_schema_is_refused(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema": 0}))
    with pytest.raises(ValueError, match=f"schema {recording.SCHEMA}"):
        recording.default_runs(str(old))
