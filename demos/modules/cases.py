"""The heaviest settings of each Modules demo, timed by `python -m bench` (BENCH_CASES)."""

from demos.modules import containers, figures, freezing, hooks, params, sharing

MAX_NET = ("16, 16, 16", hooks.MAX_SIZE, "checker", 0)


def _hooks_with_pictures():
    run = hooks.hook_outputs(*MAX_NET)
    figures.histograms_figure(run)
    figures.timeline_figure(run)
    for name, _ in run.feature_maps:
        figures.feature_maps_figure(run, name)


BENCH_CASES = {
    "parameters tab at defaults": lambda: (params.registry_table(), params.batchnorm_stats()),
    "hooks, 3 blocks x 16 channels, 64 px, with pictures": _hooks_with_pictures,
    "gradient surgery, largest net": lambda: hooks.grad_surgery(*MAX_NET, "clip", "0.01"),
    "zero a channel, largest net": lambda: hooks.zero_channel_effect(*MAX_NET, "conv3", 15),
    "freeze step, AdamW": lambda: freezing.freeze_step(("stem",), "AdamW"),
    "weight tying at its largest sizes": lambda: sharing.weight_tying(
        sharing.MAX_VOCAB, sharing.MAX_DIM, sharing.MAX_STEPS),
    "containers, 8 layers x 64": lambda: (containers.list_vs_modulelist(8, 64), containers.module_tree(8, 64)),
}
