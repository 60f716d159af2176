"""Attention & transformers: attention step by step, heads, positions, norms, the block, embeddings and dropout,
recurrent layers and packing, a tiny model that learns, and each piece written from scratch."""
