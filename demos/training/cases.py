"""Heavy training demos at their default (and worst) settings, timed by `python -m bench`."""

from demos.training import amp, losses, mistakes, optimizers, resume, schedulers, step

BENCH_CASES = {
    "walk, last sub-step (210 replayed)": lambda: step.walk(step.MAX_ITERATIONS * len(step.SUBSTEPS) - 1),
    "one loop, 150 steps": lambda: mistakes.run_loop("correct"),
    "correct loop + 7 mistakes, 150 steps": lambda: mistakes.mistakes(),
    "optimizer race, ravine, 150 steps": lambda: optimizers.race("ravine"),
    "Adam L2 vs AdamW": lambda: optimizers.decay_compare("rosenbrock"),
    "ReduceLROnPlateau, 40 epochs": lambda: schedulers.plateau(),
    "robust fit, 3 losses": lambda: losses.robust_fit(),
    "GradScaler run, 80 steps + bf16 twin": lambda: amp.scaler_run(),
    "AMP time + memory, defaults": lambda: amp.measure(),
    "AMP time + memory, largest": lambda: amp.measure(amp.MAX_HIDDEN, amp.MAX_BATCH, amp.MAX_REPS),
    "resume 5 runs, 120 steps": lambda: resume.resume_demo(),
    "resume 5 runs, 300 steps (largest)": lambda: resume.resume_demo(resume.MAX_STEPS, resume.MAX_STEPS // 2),
}
