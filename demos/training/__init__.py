"""Training-loop demos: one step in order, loop mistakes, optimizers, schedulers, losses, mixed precision, resume."""
