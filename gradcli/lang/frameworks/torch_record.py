"""What PyTorch does while a block runs, read through its public interfaces: each operation's value,
its aten name, the ``nn.Module`` that ran it and the user's line that led to it, and the calls of
custom ``torch.autograd.Function`` subclasses with their arguments.

``recording_torch()`` records on the calling thread only (another thread's operations and modules
are not its own): a ``TorchDispatchMode`` sees every aten operation (the tensor it returns is the one
the user gets, its ``grad_fn`` set once the operation returns, so nodes are resolved afterwards);
module forward hooks keep a stack of the modules running; a profiler of this thread sees each custom
Function's ``forward`` called with its ``ctx``, which is its output's ``grad_fn``.

This module imports torch: it is imported only when a torch tensor or function is met.
"""

from __future__ import annotations

import inspect
import os
import sys
import sysconfig
import threading
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.autograd.function import BackwardCFunction
from torch.utils._python_dispatch import TorchDispatchMode

from ...stats import FULL_LIMIT, arrays_kept, tensor_stats


@dataclass
class CustomCall:
    """One forward call of a custom ``torch.autograd.Function`` subclass."""

    node: Any  # the grad_fn of its (first) output: for a custom Function its ctx is that node
    function: type  # the Function subclass
    args: tuple[Any, ...]  # its forward arguments, tensors as detached copies (others as given)
    kwargs: dict[str, Any]
    scope: str | None  # the innermost nn.Module path when called ("encoder.layers.0"), else None
    line: str | None  # "model.py:12": the first frame outside torch, gradcli and the standard library


@dataclass
class TorchRecord:
    """What a ``recording_torch()`` block saw, by autograd node (a tensor's ``grad_fn``)."""

    #: node -> what it made, as ``seen`` keeps it: a copy up to ``FULL_LIMIT`` elements (or with ``keep``),
    #: else its statistics (``TensorStats``), computed when it was made
    values: dict[Any, Any] = field(default_factory=dict)
    ops: dict[Any, str] = field(default_factory=dict)  # node -> its aten op ("mul", "addmm") or Function's name
    scopes: dict[Any, str] = field(default_factory=dict)  # node -> innermost nn.Module path
    modules: dict[str, str] = field(default_factory=dict)  # module path -> class name; parents are prefixes
    lines: dict[Any, str] = field(default_factory=dict)  # node -> the user's line "file.py:LINE"
    calls: list[CustomCall] = field(default_factory=list)
    leaf_names: dict[int, str] = field(default_factory=dict)  # id(parameter) -> its path ("encoder.linear1.weight")
    #: node -> {input slot (a ``next_functions`` index): the constant there}: the numbers and small tensors
    #: that need no gradient (``x * 3``: {1: 3}), where the op's arguments line up with its slots
    constants: dict[Any, dict[int, Any]] = field(default_factory=dict)
    #: (node, output number) -> the names the user's functions gave that tensor (their local variables
    #: when they returned: ``a = torch.add(w, x)``; ``a, b = x.chunk(2)``: (node, 0), (node, 1)), innermost first
    local_names: dict[tuple[Any, int], list[str]] = field(default_factory=dict)
    #: (node, output number) -> each output of a node of several, as ``seen`` keeps it (``chunk``,
    #: ``unbind``, ``var_mean``, a custom Function returning a tuple); ``values`` keeps output 0's
    outputs: dict[tuple[Any, int], Any] = field(default_factory=dict)
    #: node -> what flowed into its outputs in the last backward through it since the block (each as
    #: ``seen`` keeps it, None where nothing did): ``recording_torch(grads=True)`` only
    grads: dict[Any, tuple[Any, ...]] = field(default_factory=dict)
    catching: bool = True  # its nodes' hooks keep the gradients a backward gives them (off: gradcli's own pass)
    hooked: dict[int, Any] = field(default_factory=dict)  # id(node) -> node, for the nodes' hooks (which hold ids)
    #: node -> the module call that computed it, ``(path, k)``: the k-th call (from 0) of that module
    #: (a cell called once per time step: ``("cells.0", 7)``)
    scope_calls: dict[Any, tuple[str, int]] = field(default_factory=dict)
    #: module call ``(path, k)`` -> the calls running when it began, outermost first, ending with itself
    module_calls: dict[tuple[str, int], tuple[tuple[str, int], ...]] = field(default_factory=dict)
    call_counts: dict[str, int] = field(default_factory=dict)  # module path -> how many times it was called
    keep: bool = False  # large values and gradients kept whole (for ``--arrays FILE.npz``), not only statistics

    def grad_of(self, node: Any, number: int = 0) -> Any:
        """The gradient a backward gave output ``number`` of ``node`` (a tensor), or None."""
        caught = self.grads.get(node)
        return caught[number] if caught is not None and number < len(caught) else None


def _skipped_prefixes() -> tuple[str, ...]:
    """Files that are not the user's: torch's, gradcli's, the standard library's."""
    paths = {Path(torch.__file__).resolve().parent, Path(__file__).resolve().parents[2]}
    for key in ("stdlib", "platstdlib"):
        paths.add(Path(sysconfig.get_paths()[key]).resolve())
    return tuple(str(p) for p in paths)


_SKIPPED = _skipped_prefixes()
#: (code object, its file) -> the file's name if the user's, else None. By the file too: two code objects
#: of the same function written in two files are equal (their file is no part of a code object's equality)
_USER: dict[tuple[Any, str], str | None] = {}


def _user_file(code: Any) -> str | None:
    key = (code, code.co_filename)
    if key not in _USER:
        name = code.co_filename
        mine = not name.startswith("<") and not str(Path(name).resolve()).startswith(_SKIPPED)
        _USER[key] = Path(name).name if mine else None
    return _USER[key]


def user_line(frame: Any) -> str | None:
    """``file.py:LINE`` of the first frame from ``frame`` outward that is the user's code."""
    while frame is not None:
        name = _user_file(frame.f_code)
        if name is not None:
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _needs_grad(args: tuple[Any, ...]) -> bool:
    """Whether an operation's arguments (and lists among them: ``cat``) hold a tensor that requires grad."""
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.requires_grad:
                return True
        elif isinstance(a, (tuple, list)) and any(isinstance(t, torch.Tensor) and t.requires_grad for t in a):
            return True
    return False


_NOT_CONSTANT = object()
SMALL = 64  # elements: a constant tensor kept for labels up to this size


def _constants(args: tuple[Any, ...]) -> list[Any] | None:
    """An op's positional arguments as constants where they are (a number, a small tensor that needs
    no gradient, copied), else ``_NOT_CONSTANT``; None when none is (nothing to keep)."""
    found = [
        a if isinstance(a, (int, float, complex)) and not isinstance(a, bool)
        else a.detach().clone() if isinstance(a, torch.Tensor) and not a.requires_grad and a.numel() <= SMALL
        else _NOT_CONSTANT
        for a in args
    ]  # fmt: skip
    return found if any(c is not _NOT_CONSTANT for c in found) else None


def seen(tensor: Any, keep: bool = False, inputs: tuple[Any, ...] = ()) -> Any:
    """What a graph keeps of a tensor met while it runs, decided when it is met (the tensor is not
    held): a copy of its own up to ``FULL_LIMIT`` elements; beyond, its statistics (``TensorStats``, on
    the whole tensor, read in place) or, with ``keep`` (``--arrays``), the whole: a copy, except for a
    view of a parameter among the operation's ``inputs`` (``weight.t()``), held as itself (torch keeps
    the parameter's memory anyway)."""
    t = tensor.detach()
    if t.numel() <= FULL_LIMIT or t.layout != torch.strided or t.is_meta:  # (no NumPy view of a sparse tensor)
        return t.clone()
    if keep:
        return t if _views_a_parameter(t, inputs) else t.clone()
    return tensor_stats(numpy_of(t))


def _views_a_parameter(tensor: Any, inputs: tuple[Any, ...]) -> bool:
    """Whether ``tensor`` shares its memory with a parameter (a leaf requiring grad) among ``inputs``."""
    storage = tensor.untyped_storage().data_ptr()
    return any(
        isinstance(a, torch.Tensor) and a.is_leaf and a.requires_grad and a.untyped_storage().data_ptr() == storage
        for a in inputs
    )


def numpy_of(tensor: Any) -> Any:
    """A tensor's values as a NumPy array, sharing its memory where it can (on the CPU, not conjugated;
    bfloat16, which NumPy has not, as float32)."""
    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.cpu().resolve_conj().resolve_neg().numpy()


def _copy(value: Any) -> Any:
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


class _Recorder(TorchDispatchMode):
    """The state of one recording, on one thread."""

    def __init__(self, record: TorchRecord, roots: Mapping[str, Any]) -> None:
        super().__init__()
        self.record = record
        self.thread = threading.get_ident()
        self.root_names = {id(m): name for name, m in roots.items()}
        self.paths: dict[int, str] = {}  # id(module) -> path, for the roots met and their submodules
        self.stack: list[tuple[Any, str]] = []  # the modules running: (module, path)
        self.calls: tuple[tuple[str, int], ...] = ()  # their calls, (path, k), as ``stack``
        #: (tensor, copy, op, call, line, constants): an op's outputs, until their grad_fn is set
        self.pending: list[tuple[Any, Any, str, tuple[str, int] | None, str | None, list[Any] | None]] = []
        self.forwards: dict[Any, Any] = {}  # a custom Function's forward frame -> its ctx
        self.firsts: set[Any] = set()  # nodes whose value is their first output's
        for name, module in roots.items():
            self._name_tree(module, name)

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """No compiler guard around ``__torch_dispatch__``: the guard imports torch's compiler on the
        first operation (a second of start-up for every ``gradcli graph``); a recording is not compiled."""
        return False

    # --- aten operations ---------------------------------------------------------------------------

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        if not torch.is_grad_enabled() or not _needs_grad(args):
            return func(*args, **(kwargs or {}))  # (its outputs get no grad_fn: not in the graph)
        # the previous operation's outputs have their grad_fn by now (not so before an op that needs no
        # grad: an inner recording's copies of the outputs it is handling pass through this one)
        self.resolve()
        out = func(*args, **(kwargs or {}))
        op = func.overloadpacket.__name__
        call = self.calls[-1] if self.calls else None
        line = user_line(sys._getframe(1))
        constants = _constants(args)
        for tensor in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(tensor, torch.Tensor):
                self.pending.append((tensor, seen(tensor, self.record.keep, args), op, call, line, constants))
        return out

    def resolve(self) -> None:
        """The recorded outputs by their ``grad_fn``: a node's first output gives its value."""
        record = self.record
        for tensor, value, op, call, line, constants in self.pending:
            node = tensor.grad_fn
            if node is not None and tensor.output_nr != 0:
                record.outputs.setdefault((node, tensor.output_nr), value)
                if node in record.ops:
                    continue
            if node is None or (node in record.ops and (tensor.output_nr != 0 or node in self.firsts)):
                continue
            if tensor.output_nr == 0:
                self.firsts.add(node)
                if constants is not None and len(constants) == len(node.next_functions):
                    found = {i: c for i, c in enumerate(constants) if c is not _NOT_CONSTANT}
                    record.constants[node] = {i: c for i, c in found.items() if node.next_functions[i][0] is None}
            record.values[node], record.ops[node] = value, op
            if call is not None:
                record.scopes[node], record.scope_calls[node] = call[0], call
            if line is not None:
                record.lines[node] = line
        self.pending.clear()

    # --- nn.Module scopes --------------------------------------------------------------------------

    def _name_tree(self, module: Any, name: str) -> None:
        for path, sub in module.named_modules():
            self.paths.setdefault(id(sub), f"{name}.{path}" if path else name)
        for path, parameter in module.named_parameters():
            self.record.leaf_names.setdefault(id(parameter), f"{name}.{path}")

    def enter(self, module: Any, *_: Any) -> None:
        if threading.get_ident() != self.thread:
            return
        path = self.paths.get(id(module))
        if path is None:
            if self.stack:  # a module that is not a registered submodule of the one running it
                path = f"{self.stack[-1][1]}.{type(module).__name__.lower()}"
            else:
                path = self.root_names.get(id(module), type(module).__name__.lower())
            taken, base, k = set(self.paths.values()), path, 0
            while path in taken:  # (two modules of one class, or named alike: kept apart)
                k += 1
                path = f"{base}_{k}"
            self._name_tree(module, path)
        self.record.modules.setdefault(path, type(module).__name__)
        self.stack.append((module, path))
        k = self.record.call_counts.get(path, 0)
        self.record.call_counts[path] = k + 1
        self.calls = (*self.calls, (path, k))
        self.record.module_calls[(path, k)] = self.calls

    def leave(self, module: Any, *_: Any) -> None:
        if threading.get_ident() != self.thread:
            return
        for k in range(len(self.stack) - 1, -1, -1):  # (a forward that raised left its inner modules open)
            if self.stack[k][0] is module:
                del self.stack[k:]
                self.calls = self.calls[:k]
                return

    # --- custom Functions ---------------------------------------------------------------------------

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            name = frame.f_code.co_name
            if name == "forward" or name == "setup_context":
                self._custom_call(frame, name)
        elif event == "return" and frame in self.forwards:
            ctx = self.forwards.pop(frame)
            first = arg[0] if isinstance(arg, (tuple, list)) and arg else arg
            if isinstance(first, torch.Tensor):
                self.record.values[ctx] = seen(first, self.record.keep)
            self._outputs(ctx, arg)
        elif event == "return" and _user_file(frame.f_code) is not None and threading.get_ident() == self.thread:
            self._name_locals(frame)

    def _outputs(self, ctx: Any, output: Any) -> None:
        """The outputs after the first of a custom Function returning several, by number."""
        if isinstance(output, (tuple, list)):
            for k, tensor in enumerate(output[1:], 1):
                if isinstance(tensor, torch.Tensor):
                    self.record.outputs.setdefault((ctx, k), seen(tensor, self.record.keep))

    def _name_locals(self, frame: Any) -> None:
        """The user's function's local variables that hold a tensor of the graph, by its node."""
        for name, value in frame.f_locals.items():
            if isinstance(value, torch.Tensor) and not name.startswith("_") and value.grad_fn is not None:
                names = self.record.local_names.setdefault((value.grad_fn, value.output_nr), [])
                if name not in names:
                    names.append(name)

    def _custom_call(self, frame: Any, name: str) -> None:
        info = inspect.getargvalues(frame)
        if not info.args or not isinstance(info.locals[info.args[0]], BackwardCFunction):
            return
        ctx = info.locals[info.args[0]]
        self.resolve()  # its inputs' nodes come before it
        function = getattr(type(ctx), "_forward_cls", type(ctx))
        if name == "forward":
            args = tuple(info.locals[a] for a in info.args[1:]) + tuple(info.locals.get(info.varargs, ()) or ())
            kwargs = dict(info.locals.get(info.keywords, {}) or {}) if info.keywords else {}
            self.forwards[frame] = ctx
        else:  # setup_context(ctx, inputs, output): forward ran without ctx
            inputs = info.locals[info.args[1]] if len(info.args) > 1 else ()
            args, kwargs = tuple(inputs), {}
            output = info.locals[info.args[2]] if len(info.args) > 2 else None
            first = output[0] if isinstance(output, (tuple, list)) and output else output
            if isinstance(first, torch.Tensor):
                self.record.values[ctx] = seen(first, self.record.keep)
            self._outputs(ctx, output)
        call = self.calls[-1] if self.calls else None
        scope = call[0] if call else None
        line = user_line(frame.f_back)
        self.record.calls.append(
            CustomCall(
                ctx, function, tuple(_copy(a) for a in args), {k: _copy(v) for k, v in kwargs.items()}, scope, line
            )
        )
        self.record.ops[ctx] = function.__name__
        self.firsts.add(ctx)
        if call is not None:
            self.record.scopes[ctx], self.record.scope_calls[ctx] = scope, call
        if line is not None:
            self.record.lines[ctx] = line


def _catch_grads(record: TorchRecord) -> None:
    """A pre-hook on every node recorded, keeping in ``record.grads`` what a later backward gives it;
    the hook holds the record weakly and the node not at all (no cycle through autograd's C++ nodes)."""
    record.hooked = {id(node): node for node in record.ops}
    mine = weakref.ref(record)

    def catcher(key: int) -> Any:
        def hook(grad_outputs: Any) -> None:
            found = mine()
            if found is not None and found.catching:
                found.grads[found.hooked[key]] = tuple(None if g is None else seen(g, found.keep) for g in grad_outputs)

        return hook

    for key, node in record.hooked.items():
        try:
            node.register_prehook(catcher(key))
        except (AttributeError, RuntimeError):  # (a node that takes no hooks: its gradient is not kept)
            continue


@contextmanager
def recording_torch(
    roots: Mapping[str, Any] | None = None, grads: bool = False, keep: bool | None = None
) -> Iterator[TorchRecord]:
    """Record what PyTorch does on this thread while the block runs (``TorchRecord``). ``roots``:
    name -> ``nn.Module``, naming module paths and parameters from the caller's variables
    (``encoder.layers.0.self_attn``); a module met outside them is named by its class, lowercased.
    ``grads``: keep what each later backward through the recorded nodes gives them (``record.grads``).
    ``keep``: values and gradients over ``FULL_LIMIT`` elements kept whole, not only their statistics
    (None: as ``stats.keeping_arrays`` says)."""
    record = TorchRecord(keep=arrays_kept() if keep is None else keep)
    recorder = _Recorder(record, roots or {})
    modules = torch.nn.modules.module
    before = modules.register_module_forward_pre_hook(recorder.enter)
    after = modules.register_module_forward_hook(recorder.leave, always_call=True)
    previous = sys.getprofile()
    chained = previous is None or callable(previous)  # (a profiler in C, cProfile's: custom calls unrecorded)

    def profile(frame: Any, event: str, arg: Any) -> None:
        recorder.profile(frame, event, arg)
        if previous is not None:
            previous(frame, event, arg)

    if chained:
        sys.setprofile(profile)
    try:
        with recorder:
            yield record
    finally:
        if chained:
            sys.setprofile(previous)
        before.remove()
        after.remove()
        recorder.resolve()
        if grads:
            _catch_grads(record)


def module_roots(function: Any, *scopes: Mapping[str, Any]) -> dict[str, Any]:
    """The ``nn.Module`` objects ``function`` can reach by name (its closure's, its globals') and
    those of some namespaces (the caller's variables), by name."""
    found: dict[str, Any] = {}
    code, cells = getattr(function, "__code__", None), getattr(function, "__closure__", None) or ()
    closure = {}
    for name, cell in zip(code.co_freevars if code is not None else (), cells):
        try:
            closure[name] = cell.cell_contents
        except ValueError:  # (an empty cell)
            continue
    for scope in (closure, getattr(function, "__globals__", {}), *scopes):
        for name, value in list(scope.items()):
            if isinstance(value, torch.nn.Module) and not name.startswith("_"):
                found.setdefault(name, value)
    return found


def input_tensor(value: Any, differentiated: bool) -> Any:
    """A function's input as a torch tensor: float64, requiring gradients when ``differentiated``; a
    torch tensor as it is (a copy that requires them, where it does not); integers stay integers
    when not differentiated."""
    if isinstance(value, torch.Tensor):
        tensor = value if value.requires_grad or not differentiated else value.detach().clone()
    else:
        array = np.asarray(value)
        tensor = torch.as_tensor(
            array if array.dtype.kind in "iub" and not differentiated else array.astype(np.float64)
        )
    if differentiated and tensor.is_floating_point() and not tensor.requires_grad:
        tensor.requires_grad_(True)
    return tensor


def uncompiled(function: Any) -> tuple[Any, bool]:
    """``function`` without ``torch.compile``'s wrapper (the function it compiles), and whether it had one:
    a graph draws what PyTorch computes eagerly (the compiled code has no autograd graph to read)."""
    original = getattr(function, "_torchdynamo_orig_callable", None)
    return (function, False) if original is None else (original, True)


@contextmanager
def compiler_off() -> Iterator[None]:
    """``torch.compile`` off while the block runs (compiled functions run eagerly, as
    ``TORCH_COMPILE_DISABLE=1`` makes them): TorchDynamo cannot trace a recording's hooks. torch's
    compiler is not imported for it: when not yet imported, the variable it reads on import is set."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        with dynamo.config.patch(disable=True):
            yield
        return
    before = os.environ.get("TORCH_COMPILE_DISABLE")
    os.environ["TORCH_COMPILE_DISABLE"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TORCH_COMPILE_DISABLE"]
        else:
            os.environ["TORCH_COMPILE_DISABLE"] = before
        imported = sys.modules.get("torch._dynamo")  # (imported inside: its setting back as the user's)
        if imported is not None:
            imported.config.disable = before == "1"
