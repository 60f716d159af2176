"""Distributed training shown with real process groups: gloo ranks on 127.0.0.1, 2 to 4 CPU processes."""

from demos.processes import bind_gloo_to_loopback

bind_gloo_to_loopback()  # the in-process gloo groups of the questions too (demos/distributed/questions.py)
