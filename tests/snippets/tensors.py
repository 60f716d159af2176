"""Tensors: each snippet, run alone, prints the numbers of the table or figure its entry point drew; where a tab has
more than one kind of result (torch refuses, too large to draw, a tuple), the check runs those cases too."""


from demos.tensors import broadcasting, devices, dtypes, einsum, layout, shapes
from tests.provenance import assert_shows_what_ran
from tests.snippets import checks, linted


@checks(broadcasting.broadcast)
def broadcast_shapes(r, run):
    assert run(r.code) == f"{r.result} None\n"
    clash = assert_shows_what_ran(broadcasting.broadcast, ("2, 3", "4, 3", ""))
    message = clash.torch_error.split(": ", 1)[1]  # torch's first line, after the exception's type
    assert run(clash.code).startswith(f"None {message}")


@checks(broadcasting.grid)
def broadcast_reads(g, run):
    assert run(g.code) == f"{list(g.reads)}\n"


@checks(layout.layout)
def strides_and_views(refused, run):
    strided = assert_shows_what_ran(layout.layout, "2, 3, 2", ".transpose(0, 2)[:, 1:, ::2].contiguous()")
    tabled = assert_shows_what_ran(layout.layout, "32, 3, 64, 64", ".to(memory_format=torch.channels_last)"
                                   ".permute(0, 2, 3, 1)")  # too large to draw: layout only
    assert refused.error and not strided.error and not tabled.error and not tabled.drawn  # view cannot walk .T
    assert not all(v.contiguous for v in strided.views) and not all(v.shares for v in strided.views)
    for r in (refused, strided, tabled):
        lines = run(linted(r.code)).splitlines()
        expected = []
        for i, v in enumerate(r.views):  # the table's columns and, drawn, the drawing's storage strip and grid
            facts = dict(shape=v.shape, stride=v.stride, offset=v.offset, contiguous=v.contiguous, shares_x=v.shares)
            if r.drawn:
                facts |= dict(storage=list(v.storage), reads=list(v.positions))
            expected.append(f"{f'y{i}' if i else 'x'} {facts}")
        if r.error:
            expected.append(f"y{len(r.views)} {r.error}")
        assert lines == expected


@checks(dtypes.promotion)
def promotion_matrix(r, run):
    assert run(r.code).splitlines() == [
        f"{label} {list(row)}" for label, row in zip(r.labels, r.results, strict=True)]


@checks(einsum.einsum)
def einsum_loops(known, run):
    summed = assert_shows_what_ran(einsum.einsum, "ijk->ki", "(2, 3, 4)")  # one operand: sum, then permute
    misfit = assert_shows_what_ran(einsum.einsum, "bij,bjk->bik", "(2, 1, 3); (1, 3, 4)")  # bmm does not broadcast
    unnamed = assert_shows_what_ran(einsum.einsum, "ij,jk,kl->il", "(2, 3); (3, 4); (4, 2)")  # no standard op
    large = assert_shows_what_ran(einsum.einsum, "ij,jk->ik", "(40, 40); (40, 40)")  # too many iterations for loops
    assert known.equivalent_ok and summed.equivalent_ok and misfit.equivalent_ok is None and not unnamed.equivalent
    assert large.python_loop_diff is None and all(r.python_loop_diff < 1e-12 for r in (known, summed, misfit, unnamed))
    for r in (known, summed, misfit, unnamed, large):
        lines = run(linted(r.code)).splitlines()
        expected = [str(r.out_shape)]
        if r.equivalent_ok is not None:
            expected.append(str(r.equivalent_ok))
        elif r.equivalent:  # torch's error, as the page's note quotes it
            expected.append("RuntimeError: " + r.equivalent_note.split(" does not apply to these sizes: ", 1)[1])
        if r.python_loop_diff is not None:  # the loop nest the page shows is the one the snippet runs
            expected.append(str(r.python_loop_diff))
            assert r.loop_code.rstrip("\n") in str(r.code)
        assert lines == expected


@checks(devices.report)
def device_placements(r, run):
    chosen, facts = run(r.code).splitlines()
    assert chosen == f"chosen device: {r.chosen}"
    facts = eval(facts, {"RuntimeError": str})  # the exception prints as RuntimeError('message')
    assert (facts["x"], facts["y"], facts["y_is_x"], facts["model_after"], facts["same_module"]) == (
        r.tensor_before, r.tensor_after, r.tensor_same_object, r.module_after, r.module_same_object)
    assert r.mixing_error.startswith(f"RuntimeError: {facts['mixing'].splitlines()[0]}")


@checks(shapes.evaluate)
def shape_lab(meta, run):
    assert shapes.evaluate.example == shapes.PRESETS["CNN head"]  # too large to run for real: meta tensors
    cases = {
        "meta": meta,
        "refused": shapes.PRESETS["view after transpose"],  # torch's error at step 2
        "cpu": ("x: 4, 5; m: 4, 5 bool", "x[m].unsqueeze(0)"),  # small: run on real CPU tensors too
        "meta mask": ("x: 4096, 4096; m: 4096, 4096 bool", "x[m].sum()"),  # a mask on meta: every value True
        "layers": ("x: 2, 4; print: 3", "nn.Sequential(nn.Linear(4, 3), nn.ReLU())(x).max(1).values + print"),
        "tuple": ("x: 6, 4", "x.chunk(3, dim=0)[1].T"),
    }
    results = {k: v if k == "meta" else assert_shows_what_ran(shapes.evaluate, *v) for k, v in cases.items()}
    assert [results[k].view_source for k in ("meta", "cpu", "meta mask")] == ["meta", "real", "meta"]
    assert results["refused"].error and results["layers"].error and "index_with_mask" in results["meta mask"].code
    for r in results.values():
        lines = run(linted(r.code)).splitlines()
        expected = [f"{s.number} {s.error}" if s.error else f"{s.number} {dict(shapes=s.outputs)}" if not s.outputs
                    else f"{s.number} {dict(shapes=s.outputs, stride=s.stride, contiguous=s.contiguous, dtype=s.dtype)}"
                         f" {s.view}"
                    for s in r.steps]  # each table row (shapes, stride, contiguity, dtype, view or copy) or its error
        if len(lines) == len(expected) + 1:  # the expression ends in something that is not a step (a tuple's item)
            assert lines[-1].startswith(f"out {{'shapes': {r.shapes!r}, ") and f"'dtype': '{r.dtype}'" in lines[-1]
            lines.pop()
        assert lines == expected


@checks(*broadcasting.TRAPS, *layout.TRAPS, *dtypes.TRAPS, *devices.TRAPS)
def tensors_trap_pair(r, run):
    assert run(r.code) == f"trap: {r.trap}\ncorrect: {r.correct}\n"
