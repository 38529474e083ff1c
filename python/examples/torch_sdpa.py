"""PyTorch's scaled_dot_product_attention over a gathered KV, served to pacts: what a user does
who gathers a sequence's pages into contiguous K and V and calls SDPA (flash, memory-efficient or
cuDNN, as PyTorch picks), in bf16 on the GPU.

    pacts-qualify --backend "exec:python3 python/examples/torch_sdpa.py" ...

Declared: bf16 query, KV and output, no KV scales, D 64 / 128 / 256, any page size, L up to 16,
windows (an explicit mask), no sinks and no soft-cap (SDPA has neither), no LSE. The gather and the
device checks are this adapter's; the attention is PyTorch's.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pacts_child  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

# SDPA in bf16 (FlashAttention-2 style kernels): fp32 logits and accumulation, P rounded to bf16
# before P.V (summed in fp32 before that rounding), exp by the approximate exp2 with the scale
# folded in, subnormals flushed; partials of split kernels in fp32. spec/tolerance.md section 2.
NUMERICS = {
    "u_logit": 2.0 ** -24, "u_q": 2.0 ** -8, "u_p": 2.0 ** -8, "eta_p": 2.0 ** -133,
    "u_acc": 2.0 ** -24, "u_partial": 2.0 ** -24, "eps_exp": 2.0 ** -21, "eps_tanh": 0.0,
    "eps_log": 2.0 ** -21, "p_rounded_in_denominator": False, "ftz": True,
}
CAPS = pacts_child.capabilities(q_formats=["bf16"], kv_formats=["bf16"], out_formats=["bf16"],
                                scale_modes=["none"], sinks=False, softcap=False, lse=False,
                                deterministic=True)


def decode(call):
    B, L, Hq, D = call.batch, call.q_len, call.num_q_heads, call.head_dim
    Hkv = call.num_kv_heads
    tau = float(np.float32(call.problem["softmax_scale"]))
    out = np.zeros((B, L, Hq, D))
    error = 0
    for b in range(B):
        bad = call.device_error(b)
        if bad:
            error |= bad
            out[b] = np.nan
            continue
        rows = [call.row_keys(b, i) for i in range(L)]
        live = [i for i in range(L) if rows[i][0] < rows[i][1]]
        if not live:
            continue
        j0 = min(rows[i][0] for i in live)
        j1 = max(rows[i][1] for i in live)
        # The gather: K and V of the keys some row sees, [1, Hkv, n, D] in bf16 (exact: bf16 codes).
        k = np.stack([call.keys(b, h, j0, j1) for h in range(Hkv)])
        v = np.stack([call.values(b, h, j0, j1) for h in range(Hkv)])
        q = np.stack([[call.q(b, i, h) for i in range(L)] for h in range(Hq)])  # [Hq, L, D]
        tq = torch.tensor(q, dtype=torch.bfloat16, device=DEVICE)[None]
        tk = torch.tensor(k, dtype=torch.bfloat16, device=DEVICE)[None]
        tv = torch.tensor(v, dtype=torch.bfloat16, device=DEVICE)[None]
        mask = np.zeros((L, j1 - j0), dtype=bool)
        for i in live:
            mask[i, rows[i][0] - j0: rows[i][1] - j0] = True
        full = bool(mask.all())
        tm = None if full else torch.tensor(mask, device=DEVICE)
        o = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, scale=tau,
                                           enable_gqa=Hq != Hkv)
        o = o[0].float().cpu().numpy().astype(np.float64)  # [Hq, L, D]
        if os.environ.get("PACTS_SDPA_DEBUG"):
            sys.stderr.write(f"b {b} rows {rows} j {j0}..{j1} mask {mask.tolist()} q {q[:, :, :3]} "
                             f"k {k[:, :, :3]} v {v[:, :, :3]} o {o[:, :, :3]}\n")
        for i in live:
            out[b, i] = o[:, i]
    return out, None, error


if __name__ == "__main__":
    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu"
    sys.exit(pacts_child.serve(decode, name="torch-sdpa-gathered",
                               device=f"{name} (PyTorch {torch.__version__})", caps=CAPS,
                               numerics=NUMERICS, variant="torch.sdpa bf16"))
