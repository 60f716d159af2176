"""Saving and deployment: state_dict, checkpoints, TorchScript vs torch.export, ONNX, quantization."""
