"""The Tensors page's engine: broadcasting, memory layout, dtype promotion, einsum and devices."""
