"""Distributed training shown with real process groups: gloo ranks on 127.0.0.1, 2 to 4 CPU processes."""
