"""Data loading demos: real DataLoader runs with real worker processes, samplers, collate_fn and pinning."""
