"""PyTorch as gradcli calls it: float64 tensors in, the forward with its pullback kept, the VJP and
JVP by ``torch.autograd`` and ``torch.func``, and the aten operations a run dispatched."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import UsageError
from .adapter import Adapter, Operations, differentiable, dtype_of, words


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

    def operations(self, function: Callable[..., Any], arrays: list[Any]) -> Operations | None:
        """The aten operations one run of ``function`` performs with complex inputs, as the complex step
        runs it (``x.conj()``, ``torch.real(x)`` or ``x.double()`` do nothing to a real tensor, and drop or
        flip the imaginary part of a complex one), and the least precise dtype it computed in. Where it
        cannot take complex values, those of a real run."""
        for kind in (np.complex128, np.float64):
            found = self._dispatched(function, [np.asarray(a, dtype=kind) for a in arrays])
            if found is not None:
                return found
        return None

    def _dispatched(self, function: Callable[..., Any], arrays: list[Any]) -> Operations | None:
        """``dispatched`` at ``arrays``; None where the function fails there."""
        try:
            return dispatched(lambda: function(*(self.tensor(a) for a in arrays)))
        except Exception:  # (it ran once already: what it did is known from the forward)
            return None

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


def dispatched(run: Callable[[], Any]) -> Operations:
    """What ``run()`` dispatched: each aten operation's name (a cast of a complex value to a real
    dtype named "cast to float32 (_to_copy)"), and the least precise floating dtype it produced."""
    import warnings

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    found = Operations(set(), np.dtype(np.float64))

    class Seen(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:  # no compiler guard (it imports torch's compiler: a second)
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            result = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__.rstrip("_")
            given = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
            made = [t for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
            made += given[:1] if func.overloadpacket.__name__.endswith("_") else []  # in place: into self
            real = [t.dtype for t in made if t.is_floating_point()]
            if any(a.is_complex() for a in given) and real and name in TorchAdapter.analytic:
                name = f"cast to {str(real[0]).rpartition('.')[2]} ({name})"  # the imaginary part dropped
            found.names.add(name)
            found.lower(str(t.dtype).rpartition(".")[2] for t in made if t.is_floating_point() or t.is_complex())
            return result

    with Seen(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Casting complex values to real discards the imaginary part"
        run()
    return found
