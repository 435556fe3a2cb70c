#!/usr/bin/env python3
"""Independent NumPy reference for the GGUF/ggml block-quantized weight formats.

Shares no code with the Tern engine (nothing under ``src/`` is imported or parsed).  It follows
ggml's definitions (ggml/src/ggml-common.h for the block layouts, ggml/src/ggml-quants.c for
``quantize_row_*_ref`` / ``dequantize_row_*``) and reproduces them bit for bit:

  * every arithmetic step is done in float32, in ggml's C operation order, without fused
    multiply-add (C code built with -ffp-contract=fast on an FMA machine may differ in rare ties
    for the K-quants' scale searches);
  * sums that ggml accumulates sequentially are accumulated sequentially here (column by column,
    vectorised across blocks), never with np.sum (pairwise);
  * f32 -> f16 scale conversion is NumPy's astype(float16): round to nearest, ties to even;
  * ``roundf`` (half away from zero), ``(int8_t)`` truncation, ggml's ``nearest_int`` (the
    1.5 * 2^23 trick: round half to even) and first-wins tie breaking are reproduced exactly;
  * ``log2f`` (MXFP4 exponent) is log2 in float64 rounded to float32, i.e. correctly rounded.

Q4_K has two scale searches: ggml's (``quantize_q4_k(x, "ggml")``, make_qkx2_quants) and
Tern's (the default, ``q4_k_tern_fit``: ggml's search with each fit's error taken from its sums),
whose bytes Tern writes; tests compare the two searches' errors.

Where ggml's C is undefined (a block whose scale reciprocal overflows, i.e. amax below ~1e-37,
or NaN / infinite input) this module defines the result the way Tern does: float -> int8
conversions saturate (NaN -> 0), Q4_0 codes are clamped to [0, 15], the MXFP4 exponent is clamped
to [0, 254], and Q8_K bsums of an all-zero block are 0.

Formats (name: elements per block, bytes per block):
    q8_0  32 /  34   f16 d, int8 qs[32]                         value = d * q
    q4_0  32 /  18   f16 d, uint8 qs[16] (j: low nibble of qs[j], j+16: high nibble)  d * (q - 8)
    mxfp4 32 /  17   uint8 e (E8M0), uint8 qs[16] (nibbles as q4_0)   kvalues[q] * 2^(e-128)
    q4_k 256 / 144   f16 d, f16 dmin, uint8 scales[12] (8 x 6-bit scale + 6-bit min), qs[128]
    q6_k 256 / 210   uint8 ql[128], uint8 qh[64], int8 scales[16], f16 d
    q8_k 256 / 292   f32 d, int8 qs[256], int16 bsums[16]   (activations, never in files)

API:
    quantize(fmt, x) -> bytes          x: float32 array, size a multiple of the block size
    dequantize(fmt, data, n) -> float32 array of n values
"""

from __future__ import annotations

import numpy as np

F32 = np.float32
BLOCK = {  # name: (elements per block, bytes per block)
    "q8_0": (32, 34),
    "q4_0": (32, 18),
    "mxfp4": (32, 17),
    "q4_k": (256, 144),
    "q6_k": (256, 210),
    "q8_k": (256, 292),
}
KVALUES_MXFP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.int8)
GROUP_MAX_EPS = F32(1e-15)


# ------------------------------------------------------------------------------------------------
# scalar helpers (vectorised)

def f32_to_f16_bits(v):
    return np.asarray(v, dtype=np.float32).astype(np.float16).view("<u2")


def f16_bits_to_f32(bits):
    return np.asarray(bits, dtype="<u2").view(np.float16).astype(np.float32)


def nearest_int(v):
    """ggml's nearest_int: (bits of (v + 12582912.f)) & 0x7fffff - 0x400000, as int64."""
    s = np.asarray(v, dtype=np.float32) + F32(12582912.0)
    return (s.view(np.int32).astype(np.int64) & 0x007FFFFF) - 0x00400000


def truncate_to_int8(v):
    """C (int8_t) conversion of a float (truncation), saturating, NaN -> 0."""
    v = np.asarray(v, dtype=np.float64)
    v = np.where(np.isnan(v), 0.0, v)
    return np.trunc(np.clip(v, -128.0, 127.0)).astype(np.int64)


def roundf(v):
    """C roundf: half away from zero (float64 keeps |v| + 0.5 exact)."""
    v = np.asarray(v, dtype=np.float32).astype(np.float64)
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def e8m0_to_f32_half(e):
    e = np.asarray(e, dtype=np.uint32)
    bits = np.where(e < 2, np.uint32(0x00200000) << e, (e - 1) << np.uint32(23)).astype("<u4")
    return bits.view(np.float32)


def first_abs_max(xb):
    """Per row: (amax, signed value) of the first element of largest |x| (strict > scan)."""
    amax = np.zeros(xb.shape[0], F32)
    mx = np.zeros(xb.shape[0], F32)
    for j in range(xb.shape[1]):
        a = np.abs(xb[:, j])
        upd = a > amax
        amax = np.where(upd, a, amax)
        mx = np.where(upd, xb[:, j], mx)
    return amax, mx


def seq_sum(terms):
    """Sequential float32 sum over axis 1 (ggml's `acc += term` loops)."""
    acc = np.zeros(terms.shape[0], F32)
    for j in range(terms.shape[1]):
        acc = acc + terms[:, j]
    return acc


def fma32(a, b, c):
    """float32 fused multiply-add a * b + c with one rounding (C's fmaf), elementwise.

    a * b is exact in float64; the float64 sum s is made round-to-odd with its exact error from
    TwoSum (where inexact and even, s moves one ulp towards the error), which float64's 29 spare
    bits make a correctly rounded float32 once converted (round to nearest even)."""
    a64 = np.asarray(a, np.float64)
    p = a64 * np.asarray(b, np.float64)
    c64 = np.asarray(c, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        s = p + c64
        t = s - p
        e = (p - (s - t)) + (c64 - t)
        even = (s.view(np.int64) & 1) == 0
        fix = np.isfinite(s) & (e != 0) & even
        s = np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
        return s.astype(F32)


def pack_nibbles(codes):
    """codes (nb, 32) -> (nb, 16): element j low nibble of byte j, element j+16 high nibble."""
    return (codes[:, :16] | (codes[:, 16:] << 4)).astype(np.uint8)


def unpack_nibbles(qs):
    qs = qs.astype(np.int64)
    return np.concatenate([qs & 0xF, qs >> 4], axis=1)


def _blocks(fmt, x):
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    qk = BLOCK[fmt][0]
    if x.size % qk:
        raise ValueError("row length %d is not a multiple of the %s block size %d" % (x.size, fmt, qk))
    return x.reshape(-1, qk)


# ------------------------------------------------------------------------------------------------
# Q8_0, Q4_0, MXFP4 (quantize_row_*_ref)

def quantize_q8_0(x):
    xb = _blocks("q8_0", x)
    amax = np.zeros(xb.shape[0], F32)
    for j in range(32):  # MAX(amax, |x|)
        a = np.abs(xb[:, j])
        amax = np.where(amax > a, amax, a)
    d = amax / F32(127)
    idv = np.where(d != 0, F32(1) / np.where(d != 0, d, F32(1)), F32(0)).astype(F32)
    q = roundf(xb * idv[:, None])
    q = np.clip(truncate_to_int8(q), -127, 127)
    out = np.empty((xb.shape[0], 34), np.uint8)
    out[:, 0:2] = f32_to_f16_bits(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.astype(np.int8).view(np.uint8)
    return out.tobytes()


def dequantize_q8_0(data, n):
    b = np.frombuffer(data, np.uint8).reshape(-1, 34)[: n // 32]
    d = f16_bits_to_f32(b[:, 0:2].copy().view("<u2").reshape(-1))
    q = b[:, 2:].view(np.int8).astype(F32)
    return (q * d[:, None]).reshape(-1)


def quantize_q4_0(x):
    xb = _blocks("q4_0", x)
    _, mx = first_abs_max(xb)  # `if (amax < |v|)` is the same strict scan
    d = mx / F32(-8)
    idv = np.where(d != 0, F32(1) / np.where(d != 0, d, F32(1)), F32(0)).astype(F32)
    v = xb * idv[:, None] + F32(8.5)
    codes = np.clip(truncate_to_int8(v), 0, 15)
    out = np.empty((xb.shape[0], 18), np.uint8)
    out[:, 0:2] = f32_to_f16_bits(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = pack_nibbles(codes)
    return out.tobytes()


def dequantize_q4_0(data, n):
    b = np.frombuffer(data, np.uint8).reshape(-1, 18)[: n // 32]
    d = f16_bits_to_f32(b[:, 0:2].copy().view("<u2").reshape(-1))
    q = (unpack_nibbles(b[:, 2:]) - 8).astype(F32)
    return (q * d[:, None]).reshape(-1)


def mxfp4_exponent(amax):
    """E8M0 exponent of a block: floor(log2f(amax)) - 2 + 127, 0 for amax == 0."""
    amax = np.asarray(amax, dtype=F32)
    pos = amax > 0
    lg = np.log2(np.where(pos, amax, F32(1)).astype(np.float64)).astype(F32)  # correctly rounded
    biased = np.floor(lg) - F32(2) + F32(127)
    e = np.clip(np.nan_to_num(biased, nan=0.0, posinf=254.0, neginf=0.0), 0, 254)
    return np.where(pos, e, 0).astype(np.uint8)


def quantize_mxfp4(x):
    xb = _blocks("mxfp4", x)
    amax, _ = first_abs_max(xb)
    e = mxfp4_exponent(amax)
    scale = e8m0_to_f32_half(e)
    cand = KVALUES_MXFP4.astype(F32)[None, None, :] * scale[:, None, None]  # exact (power of 2)
    err = np.abs(cand - xb[:, :, None])
    codes = np.argmin(err, axis=2).astype(np.int64)  # first minimum, as ggml's strict < scan
    out = np.empty((xb.shape[0], 17), np.uint8)
    out[:, 0] = e
    out[:, 1:] = pack_nibbles(codes)
    return out.tobytes()


def dequantize_mxfp4(data, n):
    b = np.frombuffer(data, np.uint8).reshape(-1, 17)[: n // 32]
    scale = e8m0_to_f32_half(b[:, 0])
    v = KVALUES_MXFP4[unpack_nibbles(b[:, 1:])].astype(F32)
    return (v * scale[:, None]).reshape(-1)


# ------------------------------------------------------------------------------------------------
# Q4_K (quantize_row_q4_K_ref with make_qkx2_quants)

def qkx2_prologue(x, w):
    """Both Q4_K searches' start: min (clamped to <= 0), max, sequential sum(w) and sum(w x), and
    which rows are constant."""
    mn = x.min(axis=1)
    mx = x.max(axis=1)
    sum_w = w[:, 0].copy()
    sum_x = sum_w * x[:, 0]
    for i in range(1, x.shape[1]):
        sum_w = sum_w + w[:, i]
        sum_x = sum_x + w[:, i] * x[:, i]
    mn = np.where(mn > 0, F32(0), mn).astype(F32)
    return mn, mx, sum_w, sum_x, mx == mn


def make_qkx2_quants(x, w, nmax, rmin, rdelta, nstep):
    """Rows of x, w (S, n) float32 -> (scale (S,), the_min (S,) = -min, L (S, n) int64)."""
    mn, mx, sum_w, sum_x, flat = qkx2_prologue(x, w)
    flat_neg_min = -mn
    rng = np.where(flat, F32(1), mx - mn)
    iscale = F32(nmax) / rng
    scale = F32(1) / iscale
    L = np.clip(nearest_int(iscale[:, None] * (x - mn[:, None])), 0, nmax)
    diff = scale[:, None] * L.astype(F32) + mn[:, None] - x
    best = seq_sum(w * (diff * diff))
    for step in range(nstep + 1):
        iscale = (F32(rmin) + F32(rdelta) * F32(step) + F32(nmax)) / np.where(flat, F32(1), mx - mn)
        laux = np.clip(nearest_int(iscale[:, None] * (x - mn[:, None])), 0, nmax)
        fl = laux.astype(F32)
        sum_l = seq_sum(w * fl)
        sum_l2 = seq_sum(w * fl * fl)
        sum_xl = seq_sum(w * fl * x)
        D = sum_w * sum_l2 - sum_l * sum_l
        ok = D > 0
        Dsafe = np.where(ok, D, F32(1))
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / Dsafe
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / Dsafe
        clamp = this_min > 0
        this_min = np.where(clamp, F32(0), this_min)
        this_scale = np.where(clamp, sum_xl / np.where(clamp, sum_l2, F32(1)), this_scale)
        diff = this_scale[:, None] * fl + this_min[:, None] - x
        cur = seq_sum(w * (diff * diff))
        better = ok & (cur < best) & ~flat
        L = np.where(better[:, None], laux, L)
        best = np.where(better, cur, best)
        scale = np.where(better, this_scale, scale)
        mn = np.where(better, this_min, mn)
    L = np.where(flat[:, None], 0, L)
    scale = np.where(flat, F32(0), scale)
    the_min = np.where(flat, flat_neg_min, -mn)
    return scale.astype(F32), the_min.astype(F32), L


def q4_k_tern_fit(x, w):
    """Tern's Q4_K sub-block search (rows of x, w (S, 32) float32 -> scale, -min, L).

    make_qkx2_quants's search (the same seed, its candidates (-1 + 0.1 c) + 15 over the range, the
    codes of each from the min of the best fit so far, the least-squares refit, min clamped to
    <= 0, strict improvement) with 14 of the 21 candidates: the even c = 0, 2, ..., 20 in order,
    then, around the best even one c* (10 if none beat the seed), c*, c* - 1 and c* + 1 clamped
    to [0, 20]; each fit's error taken from the sums instead of a second pass over the elements,
    and fused
    multiply-adds (C's fmaf, fma32 here) in the per-element work: for the
    least-squares (scale, min) of codes L, sum(w (scale L + min - x)^2) = sum(w x^2) - gain with
    gain = scale * sum(w x L) + min * sum(w x); for the seed's (s0, m0), which is no
    least-squares fit, gain = 2 s0 sum(w x L) + 2 m0 sum(w x) - s0^2 sum(w L^2)
    - 2 s0 m0 sum(w L) - m0^2 sum(w).  So it keeps the fit of largest gain.  Codes are
    clamp(rint(fma(x, iscale, -(iscale * min))), 0, 15); per element, wl = w * L, then
    sum_l += wl, sum_l2 = fma(wl, L, sum_l2), sum_xl = fma(wl, x, sum_xl), in element order.
    Written from that description, not from Tern's C++.
    """
    mn, mx, sum_w, sum_x, flat = qkx2_prologue(x, w)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        rng = np.where(flat, F32(1), mx - mn)

        def codes(iscale, code_min):  # clamp as (r > 0 ? r : 0) then (< 15 ? : 15): NaN -> 0
            r = np.rint(fma32(x, iscale[:, None], (-(iscale * code_min))[:, None]))
            r = np.where(r > F32(0), r, F32(0))
            return np.where(r < F32(15), r, F32(15)).astype(F32)

        def sums(iscale, code_min):
            fl = codes(iscale, code_min)
            wl = w * fl
            sum_l2 = np.zeros(x.shape[0], F32)
            sum_xl = np.zeros(x.shape[0], F32)
            for i in range(x.shape[1]):
                sum_l2 = fma32(wl[:, i], fl[:, i], sum_l2)
                sum_xl = fma32(wl[:, i], x[:, i], sum_xl)
            return seq_sum(wl), sum_l2, sum_xl

        iscale = F32(15) / rng
        scale = F32(1) / iscale
        m = mn.copy()
        sum_l, sum_l2, sum_xl = sums(iscale, m)
        two = F32(2)
        gain = (two * scale * sum_xl + two * m * sum_x) - (
            scale * scale * sum_l2 + two * scale * m * sum_l + m * m * sum_w)
        best_iscale, code_min, best_gain = iscale, m.copy(), gain
        best_c = np.full(x.shape[0], 10, np.int64)

        def try_candidate(c):  # c: one candidate index per row
            nonlocal best_gain, best_iscale, code_min, scale, m, best_c
            iscale = (F32(-1) + F32(0.1) * c.astype(F32) + F32(15)) / rng
            sum_l, sum_l2, sum_xl = sums(iscale, m)
            D = sum_w * sum_l2 - sum_l * sum_l
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
            clamp = this_min > 0
            this_min = np.where(clamp, F32(0), this_min)
            this_scale = np.where(clamp, sum_xl / sum_l2, this_scale)
            gain = this_scale * sum_xl + this_min * sum_x
            better = (D > 0) & (gain > best_gain)
            best_gain = np.where(better, gain, best_gain)
            best_iscale = np.where(better, iscale, best_iscale)
            code_min = np.where(better, m, code_min)
            scale = np.where(better, this_scale, scale)
            m = np.where(better, this_min, m)
            best_c = np.where(better, c, best_c)

        for k in range(0, 21, 2):
            try_candidate(np.full(x.shape[0], k, np.int64))
        centre = best_c.copy()
        for offset in (0, -1, 1):
            try_candidate(np.clip(centre + offset, 0, 20))
        L = codes(best_iscale, code_min).astype(np.int64)
    L = np.where(flat[:, None], 0, L)
    scale = np.where(flat, F32(0), scale)
    the_min = np.where(flat, -mn, -m)
    return scale.astype(F32), the_min.astype(F32), L


def q4_k_pack_scales(ls, lm):
    """8 six-bit scales and mins per block -> 12 bytes (ggml's layout)."""
    out = np.zeros((ls.shape[0], 12), np.int64)
    out[:, 0:4] = ls[:, 0:4]
    out[:, 4:8] = lm[:, 0:4]
    out[:, 8:12] = (ls[:, 4:8] & 0xF) | ((lm[:, 4:8] & 0xF) << 4)
    out[:, 0:4] |= (ls[:, 4:8] >> 4) << 6
    out[:, 4:8] |= (lm[:, 4:8] >> 4) << 6
    return out.astype(np.uint8)


def q4_k_unpack_scales(s):
    s = s.astype(np.int64)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 0xF) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    m = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc, m


def quantize_q4_k(x, search="tern"):
    """Q4_K blocks; search "tern" (Tern's scale search, q4_k_tern_fit) or "ggml"
    (quantize_row_q4_K_ref's make_qkx2_quants). Steps 2-4 are ggml's either way."""
    xb = _blocks("q4_k", x)
    nb = xb.shape[0]
    xs = xb.reshape(nb * 8, 32)
    sum_x2 = seq_sum(xs * xs)
    av_x = np.sqrt(sum_x2 / F32(32))
    w = av_x[:, None] + np.abs(xs)
    if search == "ggml":
        scales, mins, L = make_qkx2_quants(xs, w, 15, -1.0, 0.1, 20)
    else:
        scales, mins, L = q4_k_tern_fit(xs, w)
    scales = scales.reshape(nb, 8)
    mins = mins.reshape(nb, 8)
    L = L.reshape(nb, 8, 32)
    max_scale = np.zeros(nb, F32)
    max_min = np.zeros(nb, F32)
    for s in range(8):
        max_scale = np.where(scales[:, s] > max_scale, scales[:, s], max_scale)
        max_min = np.where(mins[:, s] > max_min, mins[:, s], max_min)
    inv_scale = np.where(max_scale > 0, F32(63) / np.where(max_scale > 0, max_scale, F32(1)), F32(0))
    inv_min = np.where(max_min > 0, F32(63) / np.where(max_min > 0, max_min, F32(1)), F32(0))
    ls = np.minimum(63, nearest_int(inv_scale.astype(F32)[:, None] * scales) & 0xFF)
    lm = np.minimum(63, nearest_int(inv_min.astype(F32)[:, None] * mins) & 0xFF)
    d_bits = f32_to_f16_bits(max_scale / F32(63))
    dmin_bits = f32_to_f16_bits(max_min / F32(63))
    d = f16_bits_to_f32(d_bits)[:, None] * ls.astype(F32)       # (nb, 8)
    dm = f16_bits_to_f32(dmin_bits)[:, None] * lm.astype(F32)
    xsub = xb.reshape(nb, 8, 32)
    nz = d != 0
    q = np.clip(nearest_int((xsub + dm[:, :, None]) / np.where(nz, d, F32(1))[:, :, None]), 0, 15)
    L = np.where(nz[:, :, None], q, L).reshape(nb, 256)
    qs = np.empty((nb, 128), np.int64)
    for c in range(4):
        qs[:, 32 * c: 32 * c + 32] = L[:, 64 * c: 64 * c + 32] | (L[:, 64 * c + 32: 64 * c + 64] << 4)
    out = np.empty((nb, 144), np.uint8)
    out[:, 0:2] = d_bits.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = dmin_bits.view(np.uint8).reshape(-1, 2)
    out[:, 4:16] = q4_k_pack_scales(ls, lm)
    out[:, 16:] = qs.astype(np.uint8)
    return out.tobytes()


def dequantize_q4_k(data, n):
    b = np.frombuffer(data, np.uint8).reshape(-1, 144)[: n // 256]
    nb = b.shape[0]
    d = f16_bits_to_f32(b[:, 0:2].copy().view("<u2").reshape(-1))
    dmin = f16_bits_to_f32(b[:, 2:4].copy().view("<u2").reshape(-1))
    sc, m = q4_k_unpack_scales(b[:, 4:16])
    qs = b[:, 16:].astype(np.int64)
    codes = np.empty((nb, 256), np.int64)
    for c in range(4):
        codes[:, 64 * c: 64 * c + 32] = qs[:, 32 * c: 32 * c + 32] & 0xF
        codes[:, 64 * c + 32: 64 * c + 64] = qs[:, 32 * c: 32 * c + 32] >> 4
    dl = d[:, None] * sc.astype(F32)     # (nb, 8): d * sc
    ml = dmin[:, None] * m.astype(F32)
    y = dl[:, :, None] * codes.reshape(nb, 8, 32).astype(F32) - ml[:, :, None]
    return y.reshape(-1).astype(F32)


# ------------------------------------------------------------------------------------------------
# Q6_K (quantize_row_q6_K_ref with make_qx_quants, rmse_type 1)

def make_qx_quants(x, nmax):
    """Rows of x (S, n) float32 -> (scale (S,), L (S, n) int64 in [0, 2 nmax))."""
    amax, mx = first_abs_max(x)
    zero = amax < GROUP_MAX_EPS
    mxs = np.where(zero, F32(1), mx)
    w = x * x

    def codes(iscale):
        return np.clip(nearest_int(iscale[:, None] * x), -nmax, nmax - 1)

    def sums(iscale):
        lf = codes(iscale).astype(F32)
        return seq_sum(w * x * lf), seq_sum(w * lf * lf)

    iscale = F32(-nmax) / mxs
    L = codes(iscale) + nmax
    sumlx, suml2 = sums(iscale)
    scale = np.where(suml2 != 0, sumlx / np.where(suml2 != 0, suml2, F32(1)), F32(0)).astype(F32)
    best = scale * sumlx
    for step in range(-9, 10):
        if step == 0:
            continue
        iscale = -(F32(nmax) + F32(0.1) * F32(step)) / mxs
        sumlx, suml2 = sums(iscale)
        better = (suml2 > 0) & (sumlx * sumlx > best * suml2)
        L = np.where(better[:, None], codes(iscale) + nmax, L)
        scale = np.where(better, sumlx / np.where(better, suml2, F32(1)), scale)
        best = np.where(better, scale * sumlx, best)
    L = np.where(zero[:, None], 0, L)
    scale = np.where(zero, F32(0), scale)
    return scale.astype(F32), L


def quantize_q6_k(x):
    xb = _blocks("q6_k", x)
    nb = xb.shape[0]
    scales, L = make_qx_quants(xb.reshape(nb * 16, 16), 32)
    scales = scales.reshape(nb, 16)
    L = L.reshape(nb, 16, 16)
    max_abs, max_scale = first_abs_max(scales)
    zero = max_abs < GROUP_MAX_EPS
    iscale = F32(-128) / np.where(zero, F32(1), max_scale)
    d_bits = f32_to_f16_bits(F32(1) / iscale)
    sc = (np.minimum(127, nearest_int(iscale[:, None] * scales)) & 0xFF).astype(np.uint8).view(np.int8)
    d = f16_bits_to_f32(d_bits)[:, None] * sc.astype(F32)  # (nb, 16)
    nz = d != 0
    q = np.clip(nearest_int(xb.reshape(nb, 16, 16) / np.where(nz, d, F32(1))[:, :, None]), -32, 31) + 32
    L = np.where(nz[:, :, None], q, L).reshape(nb, 256)
    ql = np.empty((nb, 128), np.int64)
    qh = np.empty((nb, 64), np.int64)
    for h in range(2):
        Lh = L[:, 128 * h: 128 * h + 128]
        q1, q2, q3, q4 = (Lh[:, 32 * t: 32 * t + 32] for t in range(4))
        ql[:, 64 * h: 64 * h + 32] = (q1 & 0xF) | ((q3 & 0xF) << 4)
        ql[:, 64 * h + 32: 64 * h + 64] = (q2 & 0xF) | ((q4 & 0xF) << 4)
        qh[:, 32 * h: 32 * h + 32] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6)
    out = np.zeros((nb, 210), np.uint8)
    out[:, 0:128] = ql.astype(np.uint8)
    out[:, 128:192] = qh.astype(np.uint8)
    out[:, 192:208] = sc.view(np.uint8)
    out[:, 208:210] = d_bits.view(np.uint8).reshape(-1, 2)
    out[zero] = 0
    return out.tobytes()


def dequantize_q6_k(data, n):
    b = np.frombuffer(data, np.uint8).reshape(-1, 210)[: n // 256]
    nb = b.shape[0]
    ql = b[:, 0:128].astype(np.int64)
    qh = b[:, 128:192].astype(np.int64)
    sc = b[:, 192:208].view(np.int8).astype(F32)
    d = f16_bits_to_f32(b[:, 208:210].copy().view("<u2").reshape(-1))
    codes = np.empty((nb, 256), np.int64)
    for h in range(2):
        lo = ql[:, 64 * h: 64 * h + 64]
        hi = qh[:, 32 * h: 32 * h + 32]
        for t in range(4):
            low4 = (lo[:, 32 * (t % 2): 32 * (t % 2) + 32] >> (0 if t < 2 else 4)) & 0xF
            codes[:, 128 * h + 32 * t: 128 * h + 32 * t + 32] = low4 | (((hi >> (2 * t)) & 3) << 4)
    ds = d[:, None] * sc  # (nb, 16): d * scale
    y = ds[:, :, None] * (codes - 32).reshape(nb, 16, 16).astype(F32)
    return y.reshape(-1).astype(F32)


# ------------------------------------------------------------------------------------------------
# Q8_K (quantize_row_q8_K_ref): activations

def quantize_q8_k(x):
    xb = _blocks("q8_k", x)
    nb = xb.shape[0]
    amax, mx = first_abs_max(xb)
    zero = amax == 0
    iscale = F32(-127) / np.where(zero, F32(1), mx)
    qs = np.clip(nearest_int(iscale[:, None] * xb), -128, 127)
    qs = np.where(zero[:, None], 0, qs)
    bsums = qs.reshape(nb, 16, 16).sum(axis=2)  # integers: order irrelevant
    d = np.where(zero, F32(0), F32(1) / iscale).astype("<f4")
    out = np.empty((nb, 292), np.uint8)
    out[:, 0:4] = d.view(np.uint8).reshape(-1, 4)
    out[:, 4:260] = qs.astype(np.int8).view(np.uint8)
    out[:, 260:292] = bsums.astype("<i2").view(np.uint8).reshape(-1, 32)
    return out.tobytes()


def dequantize_q8_k(data, n):
    b = np.frombuffer(data, np.uint8).reshape(-1, 292)[: n // 256]
    d = b[:, 0:4].copy().view("<f4").reshape(-1)
    return (d[:, None] * b[:, 4:260].view(np.int8).astype(F32)).reshape(-1)


# ------------------------------------------------------------------------------------------------

_QUANTIZE = {"q8_0": quantize_q8_0, "q4_0": quantize_q4_0, "mxfp4": quantize_mxfp4,
             "q4_k": quantize_q4_k, "q6_k": quantize_q6_k, "q8_k": quantize_q8_k}
_DEQUANTIZE = {"q8_0": dequantize_q8_0, "q4_0": dequantize_q4_0, "mxfp4": dequantize_mxfp4,
               "q4_k": dequantize_q4_k, "q6_k": dequantize_q6_k, "q8_k": dequantize_q8_k}


def quantize(fmt, x):
    """Quantizes a float32 row (size a multiple of the block size) into ggml blocks (bytes)."""
    with np.errstate(all="ignore"):
        return _QUANTIZE[fmt](x)


def dequantize(fmt, data, n):
    """Decodes n values from ggml blocks of `fmt` into a float32 array."""
    qk, bb = BLOCK[fmt]
    if n % qk or len(data) < n // qk * bb:
        raise ValueError("%d bytes do not hold %d %s values" % (len(data), n, fmt))
    with np.errstate(all="ignore"):
        return _DEQUANTIZE[fmt](bytes(data[: n // qk * bb]), n)


def row_bytes(fmt, n):
    qk, bb = BLOCK[fmt]
    return n // qk * bb


if __name__ == "__main__":  # round-trip summary on random data
    rng = np.random.default_rng(0)
    x = rng.standard_normal(256 * 16).astype(F32)
    for f in ("q8_0", "q4_0", "mxfp4", "q4_k", "q6_k"):
        y = dequantize(f, quantize(f, x), x.size)
        print("%-6s rms relative error %.5f" % (f, np.sqrt(np.mean((y - x) ** 2) / np.mean(x * x))))
