"""A PyTorch user's view: a custom autograd Function whose forward runs Add on umd.

    umd serve &                      # in another terminal
    python examples/torch_add.py     # needs torch; numpy-only users see tests/test_client.py
"""

import sys

import numpy as np

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    sys.exit("this example needs torch (pip install torch)")

from umd_client import Client

client = Client(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051")


class UmdAdd(torch.autograd.Function):
    """z = x + y computed by umd's Add (numpy broadcasting), with the usual gradient."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.shapes = (x.shape, y.shape)
        (z,) = client.run("Add", x.detach().cpu().numpy(), y.detach().cpu().numpy())
        return torch.from_numpy(z)

    @staticmethod
    def backward(ctx, grad):
        def reduce(g, shape):
            while g.dim() > len(shape):
                g = g.sum(0)
            for i, d in enumerate(shape):
                if d == 1:
                    g = g.sum(i, keepdim=True)
            return g

        xs, ys = ctx.shapes
        return reduce(grad, xs), reduce(grad, ys)


if __name__ == "__main__":
    x = torch.randn(4, 3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    z = UmdAdd.apply(x, b)
    assert torch.allclose(z, x + b), "umd result equals torch's"
    z.sum().backward()
    print("forward on umd ok; grad of bias:", b.grad)
    np.testing.assert_allclose(b.grad.numpy(), np.full(3, 4.0))
