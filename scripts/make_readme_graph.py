"""Render the README's example graphs: the gradients of a small MLP and of a transformer.

    .venv/bin/python scripts/make_readme_graph.py [--no-values] [--out docs/images]

Writes docs/images/mlp_grad_graph.svg and .png: every instruction of ``jax.grad(loss)`` of
a two-layer MLP as XLA receives it, with shapes, and -- unless ``--no-values`` -- the
values of one run on the NumPy reference executor (min / max / mean and a heatmap per
node).  And docs/images/transformer_grad_graph.svg and .png: the first picture of the
gradient of a six-layer transformer (576 instructions), its groups closed, and
transformer_grad_graph_top.png, its top left at full size.  Needs jax, Pillow and
Graphviz's ``dot``.
"""
import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import xla_explorer as xe  # noqa: E402


def mlp_loss(params, x, y):
    """Mean squared error of a two-layer tanh MLP."""
    import jax.numpy as jnp
    (w1, b1), (w2, b2) = params
    hidden = jnp.tanh(x @ w1 + b1)
    prediction = hidden @ w2 + b2
    return jnp.mean((prediction - y) ** 2)


def example_arguments(batch=8, n_in=4, n_hidden=16, n_out=2, seed=0):
    rng = np.random.default_rng(seed)
    f32 = np.float32
    params = ((rng.normal(size=(n_in, n_hidden)).astype(f32) / 2, np.zeros(n_hidden, f32)),
              (rng.normal(size=(n_hidden, n_out)).astype(f32) / 4, np.zeros(n_out, f32)))
    x = rng.normal(size=(batch, n_in)).astype(f32)
    y = rng.normal(size=(batch, n_out)).astype(f32)
    return params, x, y


def transformer_loss(layers, x):
    """Six layers of attention and an MLP, each layer in a ``jax.named_scope``."""
    import jax
    import jax.numpy as jnp
    for i, (wq, wk, wv, w1, w2) in enumerate(layers):
        with jax.named_scope(f"layer{i}"):
            with jax.named_scope("attention"):
                q, k, v = x @ wq, x @ wk, x @ wv
                x = x + jax.nn.softmax(q @ k.T / 4.0, axis=-1) @ v
            with jax.named_scope("mlp"):
                x = x + jnp.tanh(jax.nn.relu(x @ w1) @ w2)
    return jnp.mean(x ** 2)


def transformer_graph(n_layers=6, width=16, tokens=8, seed=0):
    import jax
    rng = np.random.default_rng(seed)
    layers = [tuple((rng.normal(size=(width, width)) / 4).astype(np.float32) for _ in range(5))
              for _ in range(n_layers)]
    x = rng.normal(size=(tokens, width)).astype(np.float32)
    comp = xe.from_jax(jax.grad(transformer_loss), layers, x)
    return comp.graph(title=f"jax.grad(transformer_loss), {n_layers} layers: the first picture")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "images"))
    parser.add_argument("--no-values", action="store_true", help="draw shapes only, no run")
    opts = parser.parse_args(argv)
    import jax

    params, x, y = example_arguments()
    comp = xe.from_jax(jax.grad(mlp_loss), params, x, y)
    flat_args = jax.tree_util.tree_leaves((params, x, y))
    graph = None
    if not opts.no_values:
        try:
            graph = comp.graph(args=flat_args, title="jax.grad(mlp_loss): values of one run")
        except (NotImplementedError, xe.ExecutionError) as e:
            print(f"note: running the graph failed ({e}); drawing shapes only", file=sys.stderr)
    if graph is None:
        graph = comp.graph(title="jax.grad(mlp_loss)")
    out = pathlib.Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, g in (("mlp_grad_graph", graph), ("transformer_grad_graph", transformer_graph())):
        for suffix, kw in ((".svg", {}), (".png", {"dpi": 96})):
            path = g.save(out / f"{name}{suffix}", **kw)
            print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        print(g)
    # the whole transformer picture is ~2,700 px wide: a page shrinks it past reading, so the
    # README shows its top left at full size (and links the whole SVG)
    from PIL import Image
    with Image.open(out / "transformer_grad_graph.png") as im:
        top = im.crop((0, 0, min(im.width, 1400), min(im.height, 1100)))
        top.save(out / "transformer_grad_graph_top.png", optimize=True)
    print("wrote docs/images/transformer_grad_graph_top.png")


if __name__ == "__main__":
    main()
