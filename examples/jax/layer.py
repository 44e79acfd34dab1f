"""A JAX function for gradcli: a jitted layer inside a loss (gradcli graph examples/jax/layer.py:f --at "w=0.5,x=[1,2]")."""

import jax
import jax.numpy as jnp


@jax.jit
def layer(w, x):
    return jnp.tanh(w * x)


def f(w, x):
    return jnp.sum(layer(w, x) ** 2)
