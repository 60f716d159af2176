"""Pure PyTorch computations behind every figure. Nothing here imports streamlit."""
