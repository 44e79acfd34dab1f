"""PyTorch as gradcli calls it: float64 tensors in, the forward with its pullback kept, the VJP and
JVP by ``torch.autograd`` and ``torch.func``, and the aten operations a run dispatched.

Only the inputs differentiated require grad: the others are the plain tensors a plain call passes
(``y.mul_(2)`` on one works). What PyTorch gives back becomes gradcli's float64 numbers as PyTorch
itself would read them: a ZeroTensor (``torch.sgn``'s gradient) as zeros, a sparse gradient
(``nn.Embedding(sparse=True)``) dense, a bfloat16 or float16 value cast up to float64.
"""

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

    def forward(
        self, function: Callable[..., Any], arrays: list[Any], pullback: bool | Sequence[bool]
    ) -> tuple[list[Any], Any]:
        """The outputs, and with ``pullback`` (True, or which inputs are differentiated) what ``pull``
        needs: only those inputs require grad, the others are plain tensors."""
        torch = self.module
        xs = [self.tensor(a) for a in arrays]
        if pullback:
            xs = [x.requires_grad_(True) if m and differentiable(x) else x for x, m in zip(xs, _mask(pullback, xs))]
        with torch.enable_grad():
            outputs = [self.output(o) for o in function(*xs)]
        values = [self.numbers(o) for o in outputs]
        return values, ((xs, outputs) if pullback else None)

    def numbers(self, tensor: Any) -> Any:
        """A tensor PyTorch gave as a NumPy array of gradcli's: a ZeroTensor materialised, a sparse one
        made dense, bfloat16/float16 (and complex32) cast up to float64 (complex128)."""
        torch = self.module
        tensor = tensor.detach()
        if tensor.layout != torch.strided:
            tensor = tensor.to_dense()
        if tensor.dtype in (torch.bfloat16, torch.float16):
            tensor = tensor.to(torch.float64)
        elif tensor.dtype == torch.complex32:
            tensor = tensor.to(torch.complex128)
        return tensor.numpy(force=True).copy()  # (force: a ZeroTensor's zeros, a conjugate's values)

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
        return [(lambda g: None if g is None else self.numbers(g))(next(found)) if x.requires_grad
                else None for x in xs]  # fmt: skip

    def vjp(self, function: Callable[..., Any], count: int, wanted: Sequence[bool] | None = None) -> Callable[..., Any]:
        """(inputs, cotangents) -> the inputs' gradients, differentiable themselves (for derivatives of
        derivatives); ``wanted``: the inputs differentiated (None: all), the others plain tensors. A
        custom Function whose backward is ``@once_differentiable`` refuses, as PyTorch would."""
        torch = self.module

        def pulled(*args: Any) -> tuple[Any, ...]:
            xs, cotangents = list(args[:count]), args[count:]
            mask = _mask(True if wanted is None else wanted, xs)
            with torch.enable_grad():
                xs = [x if x.requires_grad or not m or not differentiable(x) else x.detach().requires_grad_(True)
                      for x, m in zip(xs, mask)]  # fmt: skip
                outputs = [self.output(o) for o in function(*xs)]
                _refuse_once_differentiable(torch, outputs)
                pairs = [(o, c.to(o.dtype)) for o, c in zip(outputs, cotangents) if o.requires_grad]
                leaves = [x for x in xs if x.requires_grad]
                found = (torch.autograd.grad([o for o, _ in pairs], leaves, [c for _, c in pairs], allow_unused=True,
                                             create_graph=True) if pairs and leaves else [None] * len(leaves))  # fmt: skip
            grads = iter(found)
            return tuple(
                (lambda g, x: torch.zeros_like(x) if g is None else _dense(torch, g))(next(grads), x)
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
        return [self.numbers(t) for t in found]


def _mask(wanted: bool | Sequence[bool], xs: Sequence[Any]) -> list[bool]:
    return [wanted] * len(xs) if isinstance(wanted, bool) else [bool(w) for w in wanted]


def _dense(torch: Any, gradient: Any) -> Any:
    """A gradient as a strided tensor that can be differentiated again (ZeroTensor, sparse: made so)."""
    if gradient.layout != torch.strided:
        return gradient.to_dense()
    return torch.zeros(gradient.shape, dtype=gradient.dtype) if gradient._is_zerotensor() else gradient


def _refuse_once_differentiable(torch: Any, outputs: Sequence[Any]) -> None:
    """PyTorch's error where a derivative of a derivative passes through a custom Function whose
    backward is ``@once_differentiable`` (PyTorch raises only when the gradient it is given requires
    grad; ``torch.autograd.functional.hessian`` silently reads zeros there)."""
    once = torch.autograd.function.once_differentiable(lambda ctx: None).__code__
    seen, stack = set(), [o.grad_fn for o in outputs if isinstance(o, torch.Tensor) and o.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        function = getattr(node, "_forward_cls", None)
        if getattr(getattr(function, "backward", None), "__code__", None) is once:
            raise UsageError(
                f"{function.__name__}'s backward is @once_differentiable: PyTorch cannot differentiate it twice "
                "(trying to differentiate twice a function that was marked with @once_differentiable)"
            )
        stack.extend(n for n, _ in node.next_functions)


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
