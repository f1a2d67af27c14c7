"""Which algorithm XLA:CPU runs a convolution with, and what that does to Inf and NaN.

A convolution's padding cells and lhs-dilation holes are zeros.  Mathematically they
contribute nothing, but ``0 * Inf`` is NaN: an Inf or NaN kernel value over a padding cell
gives NaN where the algorithm multiplies the zero, and nothing where it skips the cell.
XLA:CPU has three algorithms and rewrites some convolutions before choosing, so the answer
depends on the convolution's types, shapes and window.  The reference follows XLA:CPU
(jaxlib 0.10.2) exactly; every rule below names the XLA source it comes from, and
``tests/test_fidelity.py`` pins each one with values from XLA:CPU.

The rewrites (``xla/service/cpu/cpu_compiler.cc``, in pipeline order):

1. ``OperandUpcaster`` then ``FloatNormalization``: a bf16 convolution (or one whose
   operands are narrower than its result) is computed in f32.
2. ``ConvolutionGroupConverter`` (``xla/hlo/transforms/simplifiers/
   convolution_group_converter.cc``), batch groups, always:

   - when the kernel's output features, the input batch and ``batch_group_count`` are all
     equal, the convolution of every batch with every output feature is computed and the
     pairs of other groups are *selected away* (no NaN leaks from them);
   - otherwise the batch group becomes an extra spatial dimension of size G, read with lhs
     dilation G, window G and stride G - 1: the products of one group's outputs with the
     other groups' kernel values are products with dilation holes.
3. The same pass, feature groups, for every result type except f16 and f32 (f64, complex,
   integers): with one input feature per group the kernel is widened to every input
   feature with *zeros* outside the group (``select(mask, kernel, 0)``), so an Inf input
   of another group times that zero is NaN; with more, the group becomes an extra spatial
   dimension read with lhs dilation (holes that the loop emitter skips: exact).
4. ``ConvCanonicalization`` (entry computation only) transposes any other convolution to
   the NHWC / HWIO layout, so the dimension numbers do not matter there.
5. ``AlgebraicSimplifier`` swaps the operands of an ungrouped convolution whose kernel
   window is larger than its input (``conv_operand_swapper.cc``,
   ``SwapConvolutionOperandsIfBeneficial``); the swapped convolution has a reversed
   window, which only the loop emitter handles.

Then the emitter (``xla/backends/cpu/codegen/thunk_emitter.cc``, ``EmitConvolutionThunk``)
hands the convolution to Eigen when ``PotentiallyImplementedAsEigenConvolution``
(``xla/service/cpu/ir_emission_utils.cc``) holds -- f16 or f32 operands, no window
reversal, 1 to 3 spatial dimensions, canonical layout, and input, kernel and output of more
than 8 bytes each (``minimum_alignment_for_allocation`` must reach Eigen's 16; f16 is
computed in f32 by then, ``ChangeOpDataType``) -- and otherwise emits loops, which skip
padding and holes.  Eigen (``xla/backends/cpu/runtime/convolution_thunk_internal.h``):

- ``EigenTransposedConv2D`` when 1 or 2 spatial dimensions, some lhs dilation above 1, no
  rhs dilation, unit strides and no feature groups (``CanUseCustomTransposedConv``): a
  matrix product of the *real* inputs with the kernel, scattered into the output -- padding
  and holes are never read;
- otherwise ``extract_image_patches`` / ``TensorVolumePatchOp`` with padding value 0, then a
  contraction: padding and holes are zeros multiplied by the kernel.

Not modelled (the reference assumes the entry computation): a convolution inside a while
body or a conditional branch is not canonicalised, so one there with non-canonical
dimension numbers takes the loops.
"""
from typing import NamedTuple

#: Eigen's expected tensor alignment (bytes); a buffer of at most 8 bytes is aligned to less
EIGEN_ALIGNMENT = 16
#: EigenTransposedConv2D's limit on its intermediate matrix (kMaxConvMatrixSize, 8 GiB)
MAX_CONV_MATRIX_BYTES = 8 << 30


class ConvPath(NamedTuple):
    """How XLA:CPU computes a convolution.

    ``algorithm``: ``"eigen"`` (patches and a contraction), ``"eigen-transposed"`` or
    ``"loops"``; ``zero_cells``: padding and holes are zeros multiplied by the kernel (only
    ``"eigen"``); ``rewrite``: ``None``, ``"batch-group-dimension"`` or
    ``"feature-group-mask"`` (see the module's docstring); ``reason``: why, in words."""
    algorithm: str
    zero_cells: bool
    rewrite: object
    reason: str


def _pow2_ceil(n):
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def _aligned(elements, item=4):
    """GetMinimumAlignmentForArray >= 16: min(PowerOf2Ceil(bytes), 16) for a non-empty buffer."""
    size = int(elements) * item
    return size > 0 and min(_pow2_ceil(size), EIGEN_ALIGNMENT) >= EIGEN_ALIGNMENT


def _prod(xs):
    p = 1
    for x in xs:
        p *= int(x)
    return p


def swaps_operands(in_sizes, k_sizes, strides, pads, ld, rd, rev):
    """AlgebraicSimplifier's operand swap (SwapConvolutionOperandsIfBeneficial) for an
    ungrouped convolution: whether the kernel window's product exceeds the swapped one."""
    kernel_product = swapped_product = 1
    for size, k, s, (lo, hi), l, r, v in zip(in_sizes, k_sizes, strides, pads, ld, rd, rev):
        plain = not v and lo == 0 and hi == 0 and r == 1
        group_dim = plain and l == k and s == k - 1
        contraction_dim = plain and k == size and l == 1 and s == 1
        if group_dim or contraction_dim:
            continue
        kernel_product *= k
        full = size == 1 and s == 1 and r == 1 and lo == k - 1 and hi == k - 1
        swapped_product *= k if full else size
    return kernel_product > swapped_product


def _direct(lhs_type, B, F, in_sizes, O, I, k_sizes, out_b, out_sizes, strides, pads, ld, rd, rev, fgc):
    """The path of an ungrouped-by-batch convolution once its rewrites are done."""
    n = len(in_sizes)
    if fgc == 1 and swaps_operands(in_sizes, k_sizes, strides, pads, ld, rd, rev):
        return ConvPath("loops", False, None, "operands swapped by the algebraic simplifier (reversed window)")
    if lhs_type not in ("f16", "f32"):
        return ConvPath("loops", False, None, f"{lhs_type} is not an Eigen convolution type")
    if any(rev):
        return ConvPath("loops", False, None, "window reversal")
    if not 1 <= n <= 3:
        return ConvPath("loops", False, None, f"{n} spatial dimensions")
    sizes = (B * F * _prod(in_sizes), O * I * _prod(k_sizes), out_b * O * _prod(out_sizes))
    if not all(_aligned(s) for s in sizes):
        return ConvPath("loops", False, None, "a buffer of at most 8 bytes (not aligned for Eigen)")
    if (n <= 2 and any(l > 1 for l in ld) and all(r == 1 for r in rd) and fgc == 1
            and all(s == 1 for s in strides)
            and B * _prod(in_sizes) * _prod(k_sizes) * O * 4 <= MAX_CONV_MATRIX_BYTES):
        return ConvPath("eigen-transposed", False, None, "lhs dilation, unit strides: EigenTransposedConv2D")
    return ConvPath("eigen", True, None, "Eigen image patches with zero padding")


def conv_path(lhs_type, result_type, B, F, in_sizes, O, I, k_sizes, out_b, out_sizes, strides, pads, ld, rd,
              rev, fgc=1, bgc=1):
    """The :class:`ConvPath` XLA:CPU takes for a convolution of a canonical ``lhs[B, F,
    in_sizes...]`` and ``rhs[O, I, k_sizes...]`` into ``[out_b, O, out_sizes...]``, with
    ``lhs_type`` / ``result_type`` element types.  Only float and complex types matter
    (integers have no Inf); zero-sized convolutions take the loops."""
    # 1. bf16 runs in f32; operands narrower than the result are upcast to it
    t = {"bf16": "f32"}.get(lhs_type, lhs_type)
    if result_type in ("f32", "f64") and t in ("f16", "f32") and result_type != t:
        t = result_type
    if 0 in (B, F, O, I) or 0 in tuple(in_sizes) + tuple(k_sizes) + tuple(out_sizes):
        return ConvPath("loops", False, None, "zero-sized")
    n = len(in_sizes)
    if bgc > 1:
        if O == bgc and B == bgc:
            # every batch with every output feature, other groups' pairs selected away
            inner = _direct(t, B, F, in_sizes, O, F, k_sizes, B, out_sizes, strides, pads, ld, rd, rev, 1)
            return inner._replace(reason=inner.reason + " (batch groups: all pairs, then a select)")
        G = bgc
        inner = _direct(t, B // G, F, tuple(in_sizes) + (G,), O // G, I, tuple(k_sizes) + (G,), out_b,
                        tuple(out_sizes) + (G,), tuple(strides) + (G - 1,), tuple(pads) + ((0, 0),),
                        tuple(ld) + (G,), tuple(rd) + (1,), tuple(rev) + (False,), 1)
        rewrite = "batch-group-dimension" if inner.zero_cells else None
        return inner._replace(rewrite=rewrite, reason=inner.reason + " (batch groups as a dilated dimension)")
    if fgc > 1 and t not in ("f16", "f32"):
        if I == 1:
            return ConvPath("loops", False, "feature-group-mask",
                            f"{t} feature groups: kernel widened with zeros outside each group")
        return ConvPath("loops", False, None, f"{t} feature groups as a dilated dimension (loops skip holes)")
    return _direct(t, B, F, in_sizes, O, I, k_sizes, out_b, out_sizes, strides, pads, ld, rd, rev, fgc)
