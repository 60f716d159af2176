"""Memory & speed: a storage-level memory tracker, a CUDA caching allocator model, transfers and torch.compile."""
