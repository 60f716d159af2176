"""Autocast for meta tensors: torch.autocast ignores the meta device, so its cast policy is applied here.

The policy is CUDA autocast's: matmul-like ops run in the low-precision dtype, norms, softmax and most losses in
float32, everything else in the dtype it is given. `cross_entropy` has no CUDA autocast rule: its log_softmax runs
in the input's dtype and only its nll_loss casts to float32 (on an H200 the saved log_softmax is bfloat16,
assets/gpu/probe_ws.txt). Casts of leaf parameters are cached for the life of the autocast region, as
torch.autocast(cache_enabled=True) does, so each weight's low-precision copy is made once per forward and held
until the region ends (or longer, if saved for backward).
The casts are real `.to()` calls, so autograd records them and the memory tracker sees every copy.
"""

from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack

LOW_PRECISION = {
    F.linear, F.conv1d, F.conv2d, F.scaled_dot_product_attention,
    torch.matmul, torch.mm, torch.bmm, torch.addmm, torch.baddbmm, torch.Tensor.matmul, torch.Tensor.__matmul__,
}
FULL_PRECISION = {
    F.layer_norm, F.group_norm, F.softmax, F.log_softmax, F.nll_loss, F.mse_loss,
    torch.Tensor.softmax, torch.Tensor.log_softmax,
}


class SimulatedAutocast(TorchFunctionMode):
    """Apply CUDA autocast's cast lists to tensors of any device (used on meta tensors)."""

    def __init__(self, dtype: torch.dtype):
        super().__init__()
        self.dtype = dtype
        self.cache: dict[int, torch.Tensor] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.cross_entropy:
            return _cross_entropy(*args, **kwargs)
        if func in LOW_PRECISION:
            args, kwargs = self._cast_all(args, kwargs, self.dtype)
        elif func in FULL_PRECISION:
            args, kwargs = self._cast_all(args, kwargs, torch.float32)
        return func(*args, **kwargs)

    def __exit__(self, *exc):
        self.cache.clear()
        return super().__exit__(*exc)

    def _cast_all(self, args, kwargs, dtype):
        return tuple(self._cast(a, dtype) for a in args), {k: self._cast(v, dtype) for k, v in kwargs.items()}

    def _cast(self, value, dtype):
        if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.dtype == dtype:
            return value
        if dtype == torch.float32 or not (value.is_leaf and value.requires_grad):
            return value.to(dtype)
        if id(value) not in self.cache:
            self.cache[id(value)] = value.to(dtype)
        return self.cache[id(value)]


def _cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                   reduction="mean", label_smoothing=0.0):
    """cross_entropy as CUDA autocast runs it: log_softmax in the input's dtype, then nll_loss cast to float32."""
    if label_smoothing or target.is_floating_point() or size_average is not None or reduce is not None:
        return F.cross_entropy(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
    log_p = torch.log_softmax(input, dim=1 if input.dim() > 1 else 0, dtype=input.dtype)
    return F.nll_loss(log_p.to(torch.float32), target, weight, ignore_index=ignore_index, reduction=reduction)


def active_simulated_autocast() -> SimulatedAutocast | None:
    """The simulated autocast mode currently on the function-mode stack, if any."""
    return next((m for m in _get_current_function_mode_stack() if isinstance(m, SimulatedAutocast)), None)


def same_autocast_as(mode: SimulatedAutocast | None):
    """A context that re-enters autocast for checkpoint recomputation (which runs outside the forward region)."""
    if mode is None or active_simulated_autocast() is not None:
        return nullcontext()
    return SimulatedAutocast(mode.dtype)
