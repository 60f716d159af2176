"""Oracle tests: what the real gloo ranks return equals what torch computes directly for the same inputs."""

import inspect
import math

import pytest
import torch
from torch.utils.data import DistributedSampler

from demos.distributed import calculators, launcher, pipeline, runs, stories, views, workers

COLL = {"length": 3, "ring_numel": 1000, "seed": 5}
DDP = {"layers": 3, "width": 32, "per_rank": 8, "bucket_cap_mb": "0.005", "micro_batches": 4, "head_first": True,
       "seed": 0}


@pytest.fixture(scope="module", params=[2, 3])
def coll(request):
    return runs.run_demo("collectives", request.param, COLL)


@pytest.fixture(scope="module")
def ddp():
    return runs.run_demo("ddp", 2, DDP)


def inputs(world: int, rank: int, n: int, seed: int):
    """The seeded tensors rank `rank` started from, rebuilt here."""
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return torch.randint(0, 10, (n,), generator=g).float(), torch.randint(0, 10, (world * n,), generator=g).float()


def test_collectives_equal_the_arithmetic(coll):
    world, n = coll.world_size, COLL["length"]
    small = torch.stack([inputs(world, r, n, COLL["seed"])[0] for r in range(world)])
    big = torch.stack([inputs(world, r, n, COLL["seed"])[1] for r in range(world)])
    expected = {
        "broadcast": lambda r: small[0],
        "all_reduce_sum": lambda r: small.sum(0),
        "all_reduce_avg": lambda r: small.mean(0),
        "all_reduce_max": lambda r: small.max(0).values,
        "all_gather": lambda r: small.flatten(),
        "reduce_scatter": lambda r: big.sum(0).chunk(world)[r],
        "scatter": lambda r: big[0].chunk(world)[r],
        "all_to_all": lambda r: torch.cat([big[j].chunk(world)[r] for j in range(world)]),
    }
    for op, fn in expected.items():
        for r in range(world):
            rec = coll.ranks[r]["ops"][op]
            assert rec["error"] == "", (op, rec["error"])
            assert torch.allclose(torch.tensor(rec["after"]), fn(r)), (op, r)
    assert torch.equal(torch.tensor(coll.ranks[0]["ops"]["reduce"]["after"]), small.sum(0))
    assert torch.equal(torch.tensor(coll.ranks[0]["ops"]["gather"]["after"]), small.flatten())
    for r in range(world):
        assert coll.ranks[r]["ops"]["broadcast"]["before"] == small[r].tolist()


def test_barrier_releases_nobody_before_the_last_arrival(coll):
    last_arrival = max(e["ops"]["barrier"]["before"][0] for e in coll.ranks)
    assert all(e["ops"]["barrier"]["after"][0] >= last_arrival - 0.001 for e in coll.ranks)  # rounding to µs


def test_ring_sends_two_n_minus_one_over_n_and_matches_all_reduce(coll):
    world = coll.world_size
    for row in views.ring_rows(coll):
        chunks = torch.empty(COLL["ring_numel"]).tensor_split(world)
        assert row["sent bytes (measured)"] <= 2 * max(c.numel() for c in chunks) * 4 * (world - 1)
        assert abs(row["sent bytes (measured)"] - row["2(N-1)/N × size"]) <= 2 * (world - 1) * 4
        assert row["max |ring − all_reduce|"] < 1e-5


def test_block_origins_follow_the_op():
    assert views.block_origins("all_gather", 3, 2, 0, 6) == [0, 0, 1, 1, 2, 2]
    assert views.block_origins("all_reduce_sum", 3, 2, 1, 2) == [None, None]


def test_ddp_gradients_equal_single_process_gradients(ddp):
    view = views.ddp_view(ddp)
    assert view["max_diff_vs_single"] <= 1e-6
    assert view["max_diff_across_ranks"] == 0.0


def test_ddp_buckets_hold_every_parameter_and_respect_the_cap(ddp):
    view = views.ddp_view(ddp)
    total = sum(n for _, _, n in view["params"])
    sizes = {name: n for name, _, n in view["params"]}
    cap = float(DDP["bucket_cap_mb"]) * 2**20
    for it in view["iterations"]:
        assert sum(b["bytes"] for b in it["buckets"]) == 4 * total
        assert sorted(p for b in it["buckets"] for p in b["params"]) == sorted(sizes)
        assert all(b["end"] >= b["start"] for b in it["buckets"])
    for b in view["iterations"][-1]["buckets"]:  # rebuilt buckets: a bucket closes once it passes the cap
        assert b["bytes"] - 4 * sizes[b["params"][-1]] < cap


def test_no_sync_cuts_the_all_reduce_count(ddp):
    view = views.ddp_view(ddp)
    acc = view["accumulation"]
    buckets = len(view["iterations"][-1]["buckets"])
    assert acc["all_reduces"]["no_sync"] == buckets
    assert acc["all_reduces"]["every_step"] == DDP["micro_batches"] * buckets
    assert acc["max_grad_diff"] <= 1e-6


def test_every_micro_batch_in_no_sync_leaves_each_rank_its_own_gradient(ddp):
    """The trap's spread equals the spread of the ranks' local accumulated gradients, computed here in one process."""
    torch.manual_seed(DDP["seed"])
    model = workers.Tower(DDP["layers"], DDP["width"], head_first=DDP["head_first"])
    x, y = workers.global_batch(2, DDP["per_rank"], DDP["width"], DDP["seed"])
    local = []
    for rank in range(2):
        mine = slice(rank * DDP["per_rank"], (rank + 1) * DDP["per_rank"])
        model.zero_grad()
        for xb, yb in zip(x[mine].tensor_split(DDP["micro_batches"]), y[mine].tensor_split(DDP["micro_batches"]),
                          strict=True):
            torch.nn.functional.mse_loss(model(xb), yb).div(DDP["micro_batches"]).backward()
        local.append([p.grad.clone() for p in model.parameters()])
    spread = max((a - b).abs().max().item() for a, b in zip(*local, strict=True))
    acc = views.ddp_view(ddp)["accumulation"]
    assert acc["all_reduces"]["never_synced"] == 0
    assert acc["rank_spread"]["never_synced"] == pytest.approx(spread, rel=1e-4) and spread > 0.01
    assert acc["rank_spread"]["no_sync"] <= 1e-6
    trap = stories.no_sync_trap(ddp)
    assert f"up to {spread:.4g}" in trap.sentence and "ran 0 all_reduces" in trap.sentence
    assert f"ran {acc['all_reduces']['no_sync']} all_reduces in its backward" in trap.sentence


def test_unused_branch_needs_find_unused_parameters(ddp):
    unused = views.ddp_view(ddp)["unused"]
    assert not unused["False"]["ok"] and "find_unused_parameters" in unused["False"]["error"]
    assert unused["True"]["ok"]
    error = unused["False"]["error"]  # it was cut at "... to `torch.nn.parallel.DistributedDataParallel`, and by "
    assert ("`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by making sure all "
            "`forward` function outputs participate in calculating loss.\n") in error
    assert "Parameter indices which did not receive grad for rank 0:" in error, "torch's whole message, not a cut"


MESSAGE = ("Expected to have finished reduction. You can enable detection by passing the keyword argument, and by "
           "\nmaking sure all outputs participate (e.g. list, dict). \nIf you already have done the above, then "
           "say so. Parameter indices which did not receive grad for rank 0: 2 3")


@pytest.mark.parametrize("limit, kept", [
    (1500, "Expected to have finished reduction. You can enable detection by passing the keyword argument, and by "
           "making sure all outputs participate (e.g. list, dict).\nIf you already have done the above, then say "
           "so. Parameter indices which did not receive grad for rank 0: 2 3"),
    (200, "Expected to have finished reduction. You can enable detection by passing the keyword argument, and by "
          "making sure all outputs participate (e.g. list, dict)."),
    (20, "Expected to have finished reduction."),
])
def test_an_error_is_cut_only_after_a_whole_sentence(limit, kept):
    """A line that goes on in lower case joins the one before; a cut falls after a sentence, never in 'e.g. list'."""
    assert workers.whole_sentences(MESSAGE, limit) == kept


@pytest.mark.parametrize("world,width", [(2, 5), (3, 4)])
def test_fsdp_shards_partition_every_parameter(world, width):
    run = runs.run_demo("fsdp", world, dict(layers=2, width=width, per_rank=2, seed=0))
    view = views.fsdp_view(run)
    model = workers.Tower(2, width)
    full = dict(model.named_parameters())
    assert sorted(view["names"]) == sorted(full)
    for name, per_rank in view["shards"].items():
        rows = [s["local"][0] if s["local"] else 0 for s in per_rank]
        chunks = [len(c) for c in torch.arange(full[name].shape[0]).chunk(world)]
        assert rows == chunks + [0] * (world - len(chunks))
        assert sum(rows) == full[name].shape[0]
        assert all(s["matches_full_rows"] for s in per_rank)
    ddp_param_bytes = view["memory"][0]["ddp"]["parameters"]
    assert sum(m["fsdp"]["parameters"] for m in view["memory"]) == ddp_param_bytes
    assert ddp_param_bytes == 4 * sum(t.numel() for t in full.values())
    phases = [(c["op"], c["phase"]) for c in view["collectives"]]
    assert ("_allgather_base_", "forward") in phases and ("_reduce_scatter_base_", "backward") in phases
    check_backward_order(view, world)


def check_backward_order(view: dict, world: int) -> None:
    """The backward sentence against the recorded collectives: the all-gather that rebuilds the first layer to run
    backward is needed, not a prefetch; only the others before the first reduce-scatter are prefetches."""
    said = stories.fsdp_story(view, world)[1]
    backward = [c for c in view["collectives"] if c["phase"] == "backward"]
    order = ["AG" if "allgather" in c["op"] else "RS" for c in backward]
    assert said.startswith(f"Backward order: {', '.join(order)} (")
    first_rs = order.index("RS")
    root_out = sum(-(-view["shards"][n][0]["full"][0] // world) * world * math.prod(view["shards"][n][0]["full"][1:])
                   for n in view["names"] if n.startswith("head")) * 4
    assert backward[first_rs]["bytes"] != root_out // world, "the first gradients sent are a sharded layer's"
    gathered = {c["bytes"] for c in backward[:first_rs]}
    assert gathered == {world * backward[first_rs]["bytes"]}, "whole layers of the size whose gradients go first"
    ahead = first_rs - 1
    assert "the first all-gather rebuilds those of the first layer to run backward" in said
    if ahead:
        assert (f"the {ahead} other all-gather{'s' * (ahead != 1)} before that reduce-scatter "
                f"{'is' if ahead == 1 else 'are'} FSDP2's backward prefetch") in said
    else:
        assert "nothing was prefetched" in said


def test_tensor_parallel_equals_the_full_linear():
    run = runs.run_demo("tensor_parallel", 2, dict(d_in=8, d_out=6, batch=3, seed=1))
    for entry in run.ranks:
        assert entry["column"]["weight_local"] == [3, 8] and entry["row"]["weight_local"] == [6, 4]
        assert entry["column"]["max_diff"] < 1e-5 and entry["row"]["max_diff"] < 1e-5
        assert entry["mlp"]["max_diff"] < 1e-4
        assert entry["mlp"]["collectives"] == 1, "one all_reduce for a column- then row-parallel pair, forward"


@pytest.mark.parametrize("layers, pairs, per_token", [(3, 2, (1 + 64) + 2 * 64), (4, 2, 2 * 64 + 2 * 64)])
def test_the_tensor_parallel_row_counts_the_mlps_linear_pairs_not_transformer_layers(layers, pairs, per_token):
    """It applied the transformer's '2 all_reduce per layer' (4 x layers per step) to the MLP tower."""
    prec = list(calculators.PRECISIONS)[0]
    rows = calculators.tradeoff_rows(1000, 4, layers, 64, 2048, prec, "This page's MLP")
    tp = next(r for r in rows if r["strategy"] == "Tensor parallel")
    assert tp["communication per step"] == pytest.approx(2 * 3 / 4 * 2048 * per_token * 2)
    assert tp["what is sent"].startswith(f"1 all_reduce per pair of Linear layers (column- then row-parallel) "
                                         f"forward, 1 backward: {2 * pairs} over this MLP's {pairs} pairs of its "
                                         f"{layers + 1} Linear layers")
    assert ("the last with the head" in tp["what is sent"]) == (layers % 2 == 1)
    gpt = next(r for r in calculators.tradeoff_rows(1000, 4, 12, 768, 2048, prec, "GPT-2 small shape (12 × 768)")
               if r["strategy"] == "Tensor parallel")
    assert gpt["communication per step"] == pytest.approx(4 * 12 * 2 * 3 / 4 * 2048 * 768 * 2)
    assert gpt["what is sent"].startswith("2 all_reduce of activations per transformer block (attention, MLP)")


@pytest.mark.parametrize("dataset,drop_last", [(10, False), (11, True)])
def test_sampler_matches_torch_and_partitions_the_dataset(dataset, drop_last):
    world = 3
    run = runs.run_demo("sampler", world, dict(dataset=dataset, shuffle=True, drop_last=drop_last, seed=2))
    data = list(range(dataset))
    for r, entry in enumerate(run.ranks):
        s = DistributedSampler(data, num_replicas=world, rank=r, shuffle=True, seed=2, drop_last=drop_last)
        s.set_epoch(1)
        assert entry["epochs"][1] == list(s)
    full = views.sampler_view(run)
    view = full["views"]["epoch 0"]
    flat = [i for idx in view["indices"] for i in idx]
    said = stories.sampler_caption(full, world, run.params)
    assert said.startswith(f"drop_last={drop_last}: {dataset} indices over {world} ranks do not split evenly")
    if drop_last:
        assert len(flat) == len(set(flat)) and view["dropped"] == dataset % world
        dropped = sorted(set(range(dataset)) - set(flat))
        order = list(torch.randperm(dataset, generator=torch.Generator().manual_seed(2)))  # epoch 0's shuffle
        assert dropped == sorted(int(i) for i in order[-len(dropped):]), "the tail of the shuffled order"
        assert (f"dropped {len(dropped)} indices on purpose ({', '.join(map(str, dropped))}: the tail of the "
                f"shuffled order) and each rank reads {dataset // world}") in said
        assert f"The ranks cover {dataset - len(dropped)} of the {dataset} indices, each once" in said
    else:
        assert view["covered"] and view["padding"] == -dataset % world
        repeated = sorted({i for i in flat if flat.count(i) > 1})
        assert (f"pads with {view['padding']} extra reads of {len(repeated)} indices from the start of the "
                f"shuffled order ({', '.join(map(str, repeated))}, outlined in red)") in said
        assert f"The ranks cover all {dataset} indices" in said


def test_an_even_split_is_said_to_have_no_padding_and_nothing_dropped():
    run = runs.run_demo("sampler", 2, dict(dataset=10, shuffle=False, drop_last=True, seed=0))
    full = views.sampler_view(run)
    assert full["views"]["epoch 0"]["padding"] == full["views"]["epoch 0"]["dropped"] == 0
    assert stories.sampler_caption(full, 2, run.params) == ("drop_last=True: 10 indices over 2 ranks split evenly, "
                                                             "5 each: every index is read exactly once, with no "
                                                             "padding and nothing dropped.")


@pytest.mark.parametrize("world", [2, 3])
def test_env_is_what_torchrun_would_set(world):
    run = runs.run_demo("env", world)
    rows = views.env_view(run)
    for r, row in enumerate(rows):
        assert row["RANK"] == str(r) == row["LOCAL_RANK"] and row["WORLD_SIZE"] == str(world)
        assert row["dist.get_rank()"] == r and row["MASTER_ADDR"] == "127.0.0.1"
    said = stories.launch_caption(rows)  # the ranks met through a FileStore: the launcher passes init_method=file://
    port = rows[0]["MASTER_PORT"]
    assert f"MASTER_ADDR=127.0.0.1 and MASTER_PORT={port} as torchrun sets them, but these ranks never used" in said
    assert 'init_method="file://…/store"' in said and "init_process_group()` without an init_method" not in said
    assert f"nothing listens on port {port}" in said
    assert "store_file=os.path.join(err_dir, \"store\")" in inspect.getsource(launcher._rank_main)
    assert 'init_method=f"file://{store_file}"' in inspect.getsource(workers.run_rank)


@pytest.mark.parametrize("kind", ["GPipe", "1F1B"])
def test_bubble_matches_the_formula(kind):
    for p in range(2, 9):
        for m in range(1, 17):
            s = pipeline.pipeline_schedule(p, m, kind)
            assert s.bubble == pytest.approx((p - 1) / (m + p - 1))
            assert len(s.tasks) == 2 * m * p
            assert max(s.peak_in_flight) == (m if kind == "GPipe" else min(m, p))


def test_zero_stages_and_param_count_come_from_torch():
    count, _ = calculators.model_param_count("This page's MLP", 3, 64)
    assert count == sum(t.numel() for t in workers.Tower(3, 64).parameters())
    prec = list(calculators.PRECISIONS)[0]
    full = sum(calculators.zero_bytes(count, 4, 0, prec).values())
    assert sum(calculators.zero_bytes(count, 4, 3, prec).values()) == full / 4 == 16 * count / 4
    gpt2, _ = calculators.model_param_count("GPT-2 small shape (12 × 768)", 1, 8)
    assert 100e6 < gpt2 < 130e6


def test_the_reduce_caption_names_every_rank_left_with_scratch(coll):
    """At 4 ranks it said 'rank 1's is undefined scratch' where ranks 1-3 are: the caption names them from the
    world size, and the figure's view marks exactly those."""
    world = coll.world_size
    scratch = [r["rank"] for r in views.collective_view(coll, "reduce")["rows"]
               if r["origins"] and set(r["origins"]) == {views.SCRATCH}]
    assert scratch == list(range(1, world))
    said = stories.reduce_caption(world)
    assert ("rank 1's is undefined scratch" if world == 2 else f"ranks 1–{world - 1}'s are undefined scratch") in said
    assert stories.reduce_caption(4).startswith("**reduce(dst=0)**: only rank 0's buffer is the sum; ranks 1–3's are")


def test_figures_draw_every_element_the_ranks_returned(coll):
    from demos.distributed import figures as figs

    view = views.collective_view(coll, "all_gather")
    fig = figs.collective_figure(view)
    assert len(fig.data[0].x) == sum(len(r["before"]) + len(r["after"]) for r in view["rows"])
    scheds = [pipeline.pipeline_schedule(3, 4, k) for k in ("GPipe", "1F1B")]
    assert sum(len(t.x) for t in figs.pipeline_figure(scheds).data) == 2 * 2 * 3 * 4
    assert len(figs.ring_figure(views.ring_rows(coll)).data[1].y) == coll.world_size
