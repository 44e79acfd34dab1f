"""Two gradients that go wrong in a function computing with gradcli's tensors, for ``gradcli why``:
a bias that pushes every ReLU off (x's gradient is zero), and a scale read out with ``float()``
(w's gradient is None).

    gradcli why examples/why.py:loss --at x=[1,-2],w=[0.5,1.5]
"""

import gradcli as gc

weight = gc.tensor([[0.3, -0.2], [0.1, 0.4]])
bias = gc.tensor([-10.0, -10.0])  # every unit off for inputs of this size


def loss(x, w):
    hidden = gc.relu(weight @ x + bias)
    scale = float(w.sum())  # meant: w.sum()
    return (hidden * scale).sum()
