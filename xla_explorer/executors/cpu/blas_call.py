"""BLAS's ``cblas_?gemm`` called from Numba code: the very library and call ``np.matmul`` makes.

A loop compiled whole (``compiled_scan``) multiplies matrices in every iteration; leaving
Numba for ``np.matmul`` would put Python back between iterations.  So the generated code
calls the OpenBLAS NumPy is linked with (``scipy_openblas64_``: NumPy's wheels) itself,
through its C interface: ``gemm32`` / ``gemm64`` are intrinsics that call a function pointer
passed as an integer -- the address is an argument, not a constant baked into the machine
code, so the compiled functions stay in Numba's disk cache.

``np.matmul`` of two C-contiguous (or transposed C-contiguous) matrices, neither a vector
nor the other's transpose of one buffer (its ``syrk`` case), calls
``cblas_sgemm(RowMajor, transA, transB, M, N, K, 1, A, lda, B, ldb, 0, C, ldc)``; so does
the code here (``tests/test_compiled_scan.py`` checks the bits against ``np.matmul``), with
OpenBLAS on one thread (``linalg._blas_enter``) as the executor's own products run.
"""
import ctypes

import numba as nb
from numba.extending import intrinsic

#: CBLAS's enums
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112

_found = None


def gemm_addresses():
    """(sgemm, dgemm, sgemv, dgemv) addresses of the OpenBLAS NumPy is linked with (ILP64:
    64-bit sizes), or None where there is none such (another BLAS, not Linux)."""
    global _found
    if _found is None:
        _found = ()
        try:
            from .linalg import openblas_paths
            for path in openblas_paths():
                lib = ctypes.CDLL(path)
                for prefix, suffix in (("scipy_cblas_", "64_"), ("cblas_", "64_")):
                    fns = [getattr(lib, f"{prefix}{name}{suffix}", None)
                           for name in ("sgemm", "dgemm", "sgemv", "dgemv")]
                    if all(f is not None for f in fns):
                        _found = tuple(ctypes.cast(f, ctypes.c_void_p).value for f in fns)
                        break
                if _found:
                    break
        except (OSError, AttributeError):
            _found = ()
    return _found or None


def _widen(builder):
    """A function of an LLVM integer value: it as i64 (sign-extended)."""
    from llvmlite import ir
    i64 = ir.IntType(64)
    return lambda v: builder.sext(v, i64) if v.type.width < 64 else builder.trunc(v, i64) if v.type.width > 64 else v


def _gemm_intrinsic(double):
    from llvmlite import ir

    def typer(typingctx, addr, ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
        ints = (addr, ta, tb, m, n, k, a, lda, b, ldb, c, ldc)
        if not all(isinstance(x, nb.types.Integer) for x in ints):
            return None

        def codegen(context, builder, signature, args):
            i32, i64, i8p = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
            real = ir.DoubleType() if double else ir.FloatType()

            as64 = _widen(builder)
            fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, real, i8p, i64, i8p, i64, real,
                                                   i8p, i64])
            addr_, ta_, tb_, m_, n_, k_, a_, lda_, b_, ldb_, c_, ldc_ = args
            fn = builder.inttoptr(as64(addr_), fnty.as_pointer())
            builder.call(fn, [ir.Constant(i32, ROW_MAJOR), builder.trunc(as64(ta_), i32),
                              builder.trunc(as64(tb_), i32), as64(m_), as64(n_), as64(k_), ir.Constant(real, 1.0),
                              builder.inttoptr(as64(a_), i8p), as64(lda_), builder.inttoptr(as64(b_), i8p),
                              as64(ldb_), ir.Constant(real, 0.0), builder.inttoptr(as64(c_), i8p), as64(ldc_)])
            return context.get_dummy_value()
        return nb.types.none(*ints), codegen
    typer.__name__ = "gemm64" if double else "gemm32"
    return intrinsic(typer)


#: gemm32(address, transA, transB, M, N, K, A, lda, B, ldb, C, ldc): C = A @ B (row-major,
#: f32; pointers as integers: ``array.ctypes.data`` plus a byte offset)
gemm32 = _gemm_intrinsic(False)
#: the same for f64 (``cblas_dgemm``)
gemm64 = _gemm_intrinsic(True)


def _gemv_intrinsic(double):
    from llvmlite import ir

    def typer(typingctx, addr, ta, m, n, a, lda, x, y):
        ints = (addr, ta, m, n, a, lda, x, y)
        if not all(isinstance(v, nb.types.Integer) for v in ints):
            return None

        def codegen(context, builder, signature, args):
            i32, i64, i8p = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
            real = ir.DoubleType() if double else ir.FloatType()

            as64 = _widen(builder)
            fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i64, i64, real, i8p, i64, i8p, i64, real, i8p, i64])
            addr_, ta_, m_, n_, a_, lda_, x_, y_ = args
            fn = builder.inttoptr(as64(addr_), fnty.as_pointer())
            one = ir.Constant(i64, 1)
            builder.call(fn, [ir.Constant(i32, ROW_MAJOR), builder.trunc(as64(ta_), i32), as64(m_), as64(n_),
                              ir.Constant(real, 1.0), builder.inttoptr(as64(a_), i8p), as64(lda_),
                              builder.inttoptr(as64(x_), i8p), one, ir.Constant(real, 0.0),
                              builder.inttoptr(as64(y_), i8p), one])
            return context.get_dummy_value()
        return nb.types.none(*ints), codegen
    typer.__name__ = "gemv64" if double else "gemv32"
    return intrinsic(typer)


#: gemv32(address, trans, M, N, A, lda, x, y): y = A @ x (NO_TRANS; A [M, N] row-major) or
#: y = A.T @ x (TRANS), unit strides, f32 (``cblas_sgemv``)
gemv32 = _gemv_intrinsic(False)
#: the same for f64 (``cblas_dgemv``)
gemv64 = _gemv_intrinsic(True)
