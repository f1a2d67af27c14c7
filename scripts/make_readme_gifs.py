"""Make the README's index-map GIFs: docs/images/{gather,scatter,reduce_window,pad}.gif.

    .venv/bin/python scripts/make_readme_gifs.py [--out docs/images] [--fps 2] [--width 820]

Each is ``xe.animate(...)`` on a small example that shows the op's corner cases: Gather's
windows clamped into bounds, Scatter's colliding and skipped updates, ReduceWindow's
padding, base dilation and window dilation, Pad's interior and negative padding.
"""
import argparse
import os
import pathlib
import sys
import time

os.environ.setdefault("MPLBACKEND", "Agg")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import xla_explorer as xe  # noqa: E402

f32, s32 = np.float32, np.int32


def gather():
    """2x3 windows of a 6x7 operand; starts [5, 6] and [-1, 2] are clamped into bounds."""
    operand = np.arange(42, dtype=f32).reshape(6, 7)
    start_indices = np.array([[0, 0], [5, 6], [2, 3], [-1, 2], [4, 1]], s32)
    return xe.animate("gather", operand, start_indices, offset_dims=[1, 2], collapsed_slice_dims=[],
                      start_index_map=[0, 1], index_vector_dim=1, slice_sizes=[2, 3])


def scatter():
    """Rows of updates added into rows of a 6x3 operand: row 2 is hit twice, rows 9, -1 and
    -9 are out of bounds and skipped."""
    inputs = np.arange(18, dtype=f32).reshape(6, 3)
    scatter_indices = np.array([[0], [2], [2], [9], [-1], [5], [-9]], s32)
    updates = np.arange(1, 22, dtype=f32).reshape(7, 3)
    return xe.animate("scatter", inputs, scatter_indices, updates, update_window_dims=[1],
                      inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1,
                      update_computation=lambda a, b: xe.Add(a, b))


def reduce_window():
    """A 2x2 sum window with window dilation [1, 2] and stride [2, 1] over a 3x4 operand
    padded by (1, 1), (0, 1) and base-dilated by [2, 1]."""
    operand = np.arange(12, dtype=f32).reshape(3, 4)
    return xe.animate("reduce-window", operand, f32(0), computation=lambda a, b: xe.Add(a, b),
                      window_dimensions=[2, 2], window_strides=[2, 1], padding=[(1, 1), (0, 1)],
                      base_dilations=[2, 1], window_dilations=[1, 2])


def pad():
    """Edge padding (1, 1) with interior padding 1 along rows; along columns a negative low
    edge (-1, cropping column 0) and a high edge of 2."""
    operand = np.arange(1, 7, dtype=f32).reshape(2, 3)
    return xe.animate("pad", operand, f32(0), padding_config=[(1, 1, 1), (-1, 2, 0)])


EXAMPLES = {"gather": gather, "scatter": scatter, "reduce_window": reduce_window, "pad": pad}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parents[1] / "docs" / "images"))
    parser.add_argument("--fps", type=float, default=2)
    parser.add_argument("--width", type=int, default=820, help="layout width in pixels (GitHub shows ~830)")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, make in EXAMPLES.items():
        start = time.perf_counter()
        anim = make()
        anim.width = args.width  # frames as wide as the README's column, so the text stays legible
        path = anim.save(out / f"{name}.gif", fps=args.fps)
        size = os.path.getsize(path) / 1024
        print(f"{path}: {len(anim.frames)} frames, {size:.0f} KiB, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
