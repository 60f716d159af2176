"""The distributed demos' CUDA branches, run on the CPU with torch.cuda answers patched: a GPU owner's run picks
a device only for a rank that has one, and the FSDP ranks shard on a CPU mesh wherever an accelerator exists."""

import pytest
import torch
import torch.distributed as dist

from demos.distributed import runs, workers


class Stop(Exception):
    """Raised instead of joining a process group: the test needs only what run_rank chose before that."""


@pytest.fixture
def one_gpu(monkeypatch):
    """torch.cuda as on a one-GPU machine; set_device fails as CUDA does for a missing ordinal."""
    chosen = {"device": None}

    def set_device(index):
        if index >= 1:
            raise RuntimeError("CUDA error: invalid device ordinal")
        chosen["device"] = index

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", set_device)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    return chosen


def backend_chosen(monkeypatch, **env) -> str:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    seen = {}

    def init_process_group(backend, **kwargs):
        seen["backend"] = backend
        raise Stop

    monkeypatch.setattr(dist, "init_process_group", init_process_group)
    with pytest.raises(Stop):
        workers.run_rank("env", {}, None)
    return seen["backend"]


def test_two_ranks_on_a_one_gpu_machine_stay_on_gloo_and_touch_no_gpu(one_gpu, monkeypatch):
    backend = backend_chosen(monkeypatch, RANK="1", LOCAL_RANK="1", WORLD_SIZE="2", LOCAL_WORLD_SIZE="2")
    assert backend == "gloo" and one_gpu["device"] is None


def test_a_rank_with_its_own_gpu_picks_it_and_adds_nccl(one_gpu, monkeypatch):
    backend = backend_chosen(monkeypatch, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
    assert backend == "cpu:gloo,cuda:nccl" and one_gpu["device"] == 0


def test_fsdp_shards_on_a_cpu_mesh_where_the_default_mesh_would_be_cuda(monkeypatch, tmp_path):
    # fully_shard without a mesh builds one on torch._C._get_accelerator(), cuda on a GPU machine
    monkeypatch.setattr(torch._C, "_get_accelerator", lambda: torch.device("cuda"))
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        out = workers.fsdp(0, 1, {"layers": 2, "width": 4, "per_rank": 2, "seed": 0})
    finally:
        dist.destroy_process_group()
    assert out["shards"] and all(s["matches_full_rows"] for s in out["shards"])
    assert out["memory"]["fsdp"]["parameters"] == out["memory"]["ddp"]["parameters"], "one rank holds everything"


def test_the_page_says_no_gpu_only_where_there_is_none(one_gpu, monkeypatch):
    assert "No GPU here" not in runs.backend_note() and "1 GPU," in runs.backend_note()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runs.backend_note().startswith("No GPU here")
