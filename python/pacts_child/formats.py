"""The number formats of spec/formats.md that this package decodes and encodes, exactly.

Decoding gives float64 values (every format here is exact in binary64). Encoding rounds a
float64 value once, to nearest even, as spec/operator.md section 9 specifies the output.
"""
import numpy as np

# Formats this package reads as inputs (query, K, V) and writes as outputs.
INPUT_FORMATS = ("bf16", "fp16")
OUTPUT_FORMATS = ("bf16", "fp16", "fp32")

STORAGE_DTYPE = {"bf16": np.uint16, "fp16": np.uint16, "fp32": np.float32}


def decode(codes, fmt):
    """float64 values of an array of codes (uint16 for bf16 / fp16, float32 for fp32)."""
    if fmt == "bf16":
        return (codes.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if fmt == "fp16":
        return codes.view(np.float16).astype(np.float64)
    if fmt == "fp32":
        return codes.astype(np.float64)
    raise ValueError(f"format {fmt}: this package decodes {', '.join(INPUT_FORMATS + ('fp32',))}")


_BF16_MAX = (2.0 - 2.0 ** -7) * 2.0 ** 127


def _round_bf16(x):
    """x (float64) rounded once to the nearest bf16 value, ties to even, as float64."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        _, e = np.frexp(x)  # x = m 2^e, 0.5 <= |m| < 1
        # 8 significant bits: the quantum of x's binade, never below the subnormal quantum 2^-133.
        quantum = np.ldexp(1.0, np.maximum(e - 8, -133))
        r = np.round(x / quantum) * quantum  # exact scaling; np.round is round-half-even
        r = np.where(np.abs(r) > _BF16_MAX, np.copysign(np.inf, x), r)
        return np.where(np.isfinite(x), r, x)


def encode(values, fmt):
    """Codes of float64 values rounded once (RNE) to `fmt`, as that format's storage dtype."""
    values = np.asarray(values, dtype=np.float64)
    if fmt == "bf16":
        r = _round_bf16(values).astype(np.float32)  # exact: r is a bf16 value
        bits = (r.view(np.uint32) >> 16).astype(np.uint16)
        return np.where(np.isnan(values), np.uint16(0x7FC0), bits).astype(np.uint16)
    if fmt == "fp16":
        return values.astype(np.float16).view(np.uint16)  # NumPy rounds double to half once
    if fmt == "fp32":
        return values.astype(np.float32)
    raise ValueError(f"format {fmt}: this package writes {', '.join(OUTPUT_FORMATS)}")
