"""Modules & hooks: parameters vs buffers, hooks and what they see, freezing, weight sharing, containers."""
