"""PyTorch FlexAttention over a paged pool, served to pacts: the whole K and V pools handed to
`flex_attention` (compiled) as one physical sequence of num_pages x page_size slots, and a mask
that maps each physical slot through the sequence's block table to its logical key, as torch's
own paged-attention helper does (torch.nn.attention.experimental._paged_attention).

    pacts-qualify --backend "exec:python3 python/examples/torch_flex.py" ...

Every slot of the pool, owned or not, is passed to the kernel; the mask alone keeps the unowned
ones out (spec/contract.md section 1), which is what the POISON properties judge. The gather of
the pool into FlexAttention's [1, H_kv, slots, D] tensors, the inverse block table and the device
checks are this adapter's; the attention is PyTorch's compiled Triton kernel.

Declared: bf16 query, KV and output, no KV scales, D 64 / 128 / 256, pages 8 to 256, L up to 16,
windows, soft-cap (a score_mod), LSE, no sinks. A page named at two owned columns of a sequence
is copied to a page of its own at the end of the pool (the physical mask maps a slot to one key),
as an adapter copies what its kernel cannot address. A shape for which torch.compile finds no
FlexAttention kernel ("NoValidChoicesError") is answered NotSupported with the shape: a refusal
the capability list cannot say.
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pacts_child  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

# FlexAttention's Triton kernels in bf16: fp32 logits and accumulation, P rounded to bf16 before
# P.V, exp2 of the scaled logits (approximate), fp32 partials of the split decode kernel, tanh
# from libdevice; spec/tolerance.md section 2.
NUMERICS = {
    "u_logit": 2.0 ** -24, "u_q": 2.0 ** -8, "u_p": 2.0 ** -8, "eta_p": 2.0 ** -133,
    "u_acc": 2.0 ** -24, "u_partial": 2.0 ** -24, "eps_exp": 2.0 ** -21, "eps_tanh": 2.0 ** -21,
    "eps_log": 2.0 ** -21, "p_rounded_in_denominator": False, "ftz": True,
}

try:
    import torch._dynamo

    # One compiled kernel per shape: the catalogue's shapes vary, and a fall-back to eager would
    # judge PyTorch's unfused reference instead of FlexAttention's kernel.
    for _name, _value in (("recompile_limit", 1 << 16), ("cache_size_limit", 1 << 16),
                          ("accumulated_recompile_limit", 1 << 20),
                          ("accumulated_cache_size_limit", 1 << 20)):
        if hasattr(torch._dynamo.config, _name):
            setattr(torch._dynamo.config, _name, _value)
except ImportError:
    pass

from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: E402

FLEX = torch.compile(flex_attention, dynamic=False, fullgraph=True)


def bucket(n, least):
    """The power of two at least n and least (fewer distinct shapes, fewer compilations)."""
    b = least
    while b < n:
        b *= 2
    return b


def lse_to_natural():
    """The factor that turns flex_attention's returned LSE into a natural log, found by a probe:
    all logits 0 over 128 visible keys give ln 128 (natural) or 7 (base 2). None: neither."""
    z = torch.zeros(1, 1, 1, 64, dtype=torch.bfloat16, device=DEVICE)
    kv = torch.zeros(1, 1, 128, 64, dtype=torch.bfloat16, device=DEVICE)
    _, lse = FLEX(z, kv, kv, return_lse=True)
    got = float(lse.reshape(-1)[0])
    if abs(got - math.log(128)) < 1e-3:
        return 1.0
    if abs(got - 7.0) < 1e-3:
        return math.log(2.0)
    sys.stderr.write(f"torch_flex: LSE probe gave {got}, neither ln 128 nor log2 128\n")
    return None


def bf16_tensor(codes):
    """bf16 codes (uint16) as a torch bf16 tensor on the device, bit for bit."""
    return torch.from_numpy(np.ascontiguousarray(codes).astype(np.uint16).view(np.int16)).view(
        torch.bfloat16).to(DEVICE)


def pool(call, which, raw):
    """The whole pool as [1, H_kv, num_pages * page_size, D] (slot p * page_size + t of page p),
    every element carried (unowned ones included): element (page, head, token, d) of the layout
    is code s_page page + s_head head + s_tok token + s_chunk (d // chunk) + d % chunk, one
    strided view of the raw codes copied once."""
    l = call.problem[f"{which}_layout"]
    P, D, C, H = call.page_size, call.head_dim, l["chunk"], call.num_kv_heads
    flat = np.ascontiguousarray(raw.reshape(-1)).astype(np.uint16, copy=False)
    e = flat.itemsize
    view = np.lib.stride_tricks.as_strided(
        flat, shape=(H, call.num_pages, P, D // C, C),
        strides=(l["s_head"] * e, l["s_page"] * e, l["s_tok"] * e, l["s_chunk"] * e, e),
        writeable=False)
    return bf16_tensor(view.reshape(1, H, call.num_pages * P, D))


def prepare(call, lse_factor):
    """Everything but the kernel: the pool on the device, the inverse block table, the block mask
    (not timed by pacts-bench); launch() is the compiled flex_attention call alone."""
    B, L, Hq, D, Hkv, P = (call.batch, call.q_len, call.num_q_heads, call.head_dim,
                           call.num_kv_heads, call.page_size)
    p = call.problem
    tau = float(np.float32(p["softmax_scale"]))
    cap = float(np.float32(p["softcap"]))
    Bp, Lp = bucket(B, 1), bucket(L, 1)
    lo = np.zeros((Bp, Lp), dtype=np.int64)
    hi = np.zeros((Bp, Lp), dtype=np.int64)
    error, bad = 0, []
    owner = {}   # (sequence, physical page) -> owned column
    extra = []   # pages copied to the end of the pool: a page named again in one sequence
    for b in range(B):
        e = call.device_error(b)
        if e:
            error |= e
            bad.append(b)
            continue
        k0, k1 = call.owned_columns(b)
        for c in range(k0, k1):
            page = int(call.block_table[b * call.block_table_stride + c])
            if (b, page) in owner:
                extra.append(page)
                page = call.num_pages + len(extra) - 1
            owner[(b, page)] = c
        for i in range(L):
            lo[b, i], hi[b, i] = call.row_keys(b, i)
    slots = (call.num_pages + len(extra)) * P
    Sp = bucket(slots, 128)
    n_cols = (Sp + P - 1) // P
    inv = np.full((Bp, n_cols), -1, dtype=np.int64)  # physical page -> owned column, per sequence
    for (b, page), c in owner.items():
        inv[b, page] = c
    # The query, decoded and times q_scale, rounded to bf16: [Bp, Hq, Lp, D].
    q = np.zeros((Bp, Hq, Lp, D))
    for b in range(B):
        for i in range(L):
            for h in range(Hq):
                q[b, h, i] = call.q(b, i, h)
    tq = torch.tensor(q, dtype=torch.bfloat16, device=DEVICE)
    tk = torch.zeros(1, Hkv, Sp, D, dtype=torch.bfloat16, device=DEVICE)
    tv = torch.zeros(1, Hkv, Sp, D, dtype=torch.bfloat16, device=DEVICE)
    for which, raw, t in (("k", call.k_pages, tk), ("v", call.v_pages, tv)):
        whole = pool(call, which, raw)
        t[:, :, :call.num_pages * P] = whole
        for n, page in enumerate(extra):
            at = (call.num_pages + n) * P
            t[:, :, at:at + P] = whole[:, :, page * P:(page + 1) * P]
    inv_t = torch.tensor(inv, device=DEVICE)
    lo_t = torch.tensor(lo, device=DEVICE)
    hi_t = torch.tensor(hi, device=DEVICE)

    def mask_mod(b, h, q_idx, kv_idx):
        col = inv_t[b, kv_idx // P]
        j = col * P + kv_idx % P
        return (col >= 0) & (j >= lo_t[b, q_idx]) & (j < hi_t[b, q_idx])

    block_mask = create_block_mask(mask_mod, B=Bp, H=None, Q_LEN=Lp, KV_LEN=Sp, device=DEVICE)
    kwargs = {"block_mask": block_mask, "scale": tau, "enable_gqa": Hq != Hkv,
              "return_lse": bool(p["want_lse"])}
    if cap > 0:
        cap_t = torch.tensor(cap, dtype=torch.float32, device=DEVICE)

        def soft_cap(score, b, h, q_idx, kv_idx):
            return cap_t * torch.tanh(score / cap_t)

        kwargs["score_mod"] = soft_cap
    state = {}

    def launch():
        try:
            state["res"] = FLEX(tq, tk, tv, **kwargs)
        except Exception as e:  # torch.compile found no kernel for this shape
            if "NoValidChoices" not in f"{type(e).__name__} {e}":
                raise
            raise pacts_child.NotSupported(
                f"FlexAttention (torch.compile) has no kernel for q [{Bp}, {Hq}, {Lp}, {D}] with "
                f"{Hkv} KV heads (group {Hq // Hkv}), {Sp} KV slots: NoValidChoicesError") from None

    def result():
        res = state["res"]
        o, lse = (res if p["want_lse"] else (res, None))
        o = o.float().cpu().numpy().astype(np.float64)  # [Bp, Hq, Lp, D]
        out = np.transpose(o[:B, :, :L], (0, 2, 1, 3)).copy()  # [B, L, Hq, D]
        lse_out = None
        if p["want_lse"]:
            lse_out = np.transpose(lse.float().cpu().numpy().astype(np.float64)[:B, :, :L], (0, 2, 1))
            lse_out = lse_out * lse_factor
        for b in bad:
            out[b] = np.nan
            if lse_out is not None:
                lse_out[b] = np.nan
        return out, lse_out, error

    return pacts_child.Prepared(launch, result, pacts_child.TorchCudaClock()
                                if DEVICE == "cuda" else pacts_child.HostClock())


def decode(call, lse_factor):
    ready = prepare(call, lse_factor)
    ready.launch()
    return ready.result()


if __name__ == "__main__":
    factor = lse_to_natural()
    caps = pacts_child.capabilities(q_formats=["bf16"], kv_formats=["bf16"], out_formats=["bf16"],
                                    scale_modes=["none"], sinks=False, softcap=True,
                                    lse=factor is not None, deterministic=True)
    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu"
    sys.exit(pacts_child.serve(lambda call: decode(call, factor), name="torch-flex-paged",
                               device=f"{name} (PyTorch {torch.__version__})", caps=caps,
                               numerics=NUMERICS, variant="torch.flex_attention bf16, paged mask",
                               prepare=lambda call: prepare(call, factor)))
