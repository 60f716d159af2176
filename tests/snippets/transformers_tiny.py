"""Attention & transformers, Tiny model: the training script, run alone, prints the run the figure draws."""

from demos.threads import ONE_THREAD_LINE
from demos.transformers import tiny_model
from tests.snippets import checks, linted


@checks(tiny_model.tiny_model)
def tiny_attention(r, run):
    lines = run(linted(r.code)).splitlines()
    assert ONE_THREAD_LINE in r.code, "the page trains on one thread; the script must add its sums in that order"
    assert lines[0] == f"loss at every step: {list(r.losses)}"
    for line, c in zip(lines[1:], r.checkpoints, strict=False):
        assert line == (f"step {c.step}: held-out token accuracy {c.token_accuracy}, sequences {c.sequence_accuracy}, "
                        f"attention on the expected position per head {list(c.head_mass)}, best head per position "
                        f"{c.best_head_mass}"), line
    rest = lines[1 + len(r.checkpoints):]
    maps = []
    for h, head in enumerate(r.final.maps, 1):
        maps.append(f"head {h} after {r.steps} steps (rows: output positions, columns: the {2 * r.length} positions "
                    "read):")
        maps += [" ".join(f"{w:.2f}" for w in row) for row in head]
    assert rest == [*maps, f"training sequences dropped because they were held out: {r.dropped}"]
    assert r.final.token_accuracy == 1.0, "the example run (copy, 50 steps at lr 0.01) learns the task"
