"""``gradcli.functional``: Jacobians, Hessians and products with them (see ``autograd.functional``)."""

from .autograd.functional import Plan, hessian, hvp, jacobian, jvp, vhp, vjp

__all__ = ["Plan", "hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]
