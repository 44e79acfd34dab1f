"""PyTorch as gradcli calls it: float64 tensors in, the forward with its pullback kept, the VJP and
JVP by ``torch.autograd`` and ``torch.func``, and the aten operations a run dispatched."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import UsageError
from .adapter import Adapter, differentiable, dtype_of, words


class TorchAdapter(Adapter):
    name = "torch"
    analytic = words(
        "add sub rsub mul div neg exp exp2 expm1 log log1p log2 log10 sin cos tan sinh cosh tanh asin acos atan "
        "asinh acosh atanh sigmoid sqrt rsqrt reciprocal pow square mm addmm bmm baddbmm matmul dot mv addmv linear "
        "einsum sum mean prod cumsum view reshape _unsafe_view t transpose permute expand select slice index "
        "index_select gather stack cat clone squeeze unsqueeze alias lift_fresh copy _to_copy detach "
        "_softmax _log_softmax softmax log_softmax zeros_like ones_like full_like fill zero new_zeros new_ones "
        "new_empty empty_like split split_with_sizes unbind chunk narrow diagonal diag trace flip roll repeat "
        "contiguous as_strided unfold movedim"
    )

    def operations(self, function: Callable[..., Any], arrays: list[Any]) -> set[str] | None:
        """The aten operations one run of ``function`` performs."""
        from torch.utils._python_dispatch import TorchDispatchMode

        seen: set[str] = set()

        class Seen(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:  # no compiler guard (it imports torch's compiler: a second)
                return False

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
                seen.add(func.overloadpacket.__name__.rstrip("_"))
                return func(*args, **(kwargs or {}))

        try:
            with Seen():
                function(*(self.tensor(a) for a in arrays))
        except Exception:  # (it ran once already: what it did is known from the forward)
            return None
        return seen

    def tensor(self, array: Any) -> Any:
        torch = self.module
        return torch.from_numpy(np.array(array, dtype=dtype_of(array)))

    def forward(self, function: Callable[..., Any], arrays: list[Any], pullback: bool) -> tuple[list[Any], Any]:
        torch = self.module
        xs = [self.tensor(a) for a in arrays]
        if pullback:
            xs = [x.requires_grad_(True) if differentiable(x) else x for x in xs]
        with torch.enable_grad():
            outputs = [self.output(o) for o in function(*xs)]
        values = [o.detach().numpy().copy() for o in outputs]
        return values, ((xs, outputs) if pullback else None)

    def output(self, value: Any) -> Any:
        torch = self.module
        if isinstance(value, torch.Tensor):
            return value
        try:
            return torch.as_tensor(np.asarray(value, dtype=dtype_of(value)))
        except (TypeError, ValueError):
            raise UsageError(f"the function returned a {type(value).__name__}: return tensors or numbers") from None

    def pull(self, pullback: Any, cotangents: list[Any]) -> list[Any]:
        torch = self.module
        xs, outputs = pullback
        pairs = [(o, torch.from_numpy(np.array(c, dtype=dtype_of(c)))) for o, c in zip(outputs, cotangents)]
        pairs = [(o, c.to(o.dtype)) for o, c in pairs if o.requires_grad]
        wanted = [x for x in xs if x.requires_grad]
        if not pairs or not wanted:
            return [None] * len(xs)
        found = iter(torch.autograd.grad([o for o, _ in pairs], wanted, [c for _, c in pairs], allow_unused=True,
                                         retain_graph=True))  # fmt: skip
        return [(lambda g: None if g is None else g.detach().numpy().copy())(next(found)) if x.requires_grad
                else None for x in xs]  # fmt: skip

    def vjp(self, function: Callable[..., Any], count: int, wanted: Sequence[bool] | None = None) -> Callable[..., Any]:
        torch = self.module

        def pulled(*args: Any) -> tuple[Any, ...]:
            xs, cotangents = list(args[:count]), args[count:]
            with torch.enable_grad():
                xs = [x if x.requires_grad or not differentiable(x) else x.detach().requires_grad_(True) for x in xs]
                outputs = [self.output(o) for o in function(*xs)]
                pairs = [(o, c.to(o.dtype)) for o, c in zip(outputs, cotangents) if o.requires_grad]
                wanted = [x for x in xs if x.requires_grad]
                found = (torch.autograd.grad([o for o, _ in pairs], wanted, [c for _, c in pairs], allow_unused=True,
                                             create_graph=True) if pairs and wanted else [None] * len(wanted))  # fmt: skip
            grads = iter(found)
            return tuple(
                (lambda g, x: torch.zeros_like(x) if g is None else g)(next(grads), x)
                if x.requires_grad
                else torch.zeros_like(x)
                for x in xs
            )

        return pulled

    def jvp(self, function: Callable[..., Any], arrays: list[Any], tangents: list[Any]) -> list[Any]:
        from torch.func import jvp

        from ...autograd.forward import NoForwardRule  # lazy: forward mode is rarely asked for

        try:
            _, found = jvp(lambda *xs: tuple(self.output(o) for o in function(*xs)),
                           tuple(self.tensor(a) for a in arrays), tuple(self.tensor(t) for t in tangents))  # fmt: skip
        except (RuntimeError, NotImplementedError) as failed:
            said = str(failed).split(". ")[0].splitlines()[0]
            raise NoForwardRule(f"PyTorch's forward mode cannot run this function ({said})") from None
        return [t.detach().numpy().copy() for t in found]
