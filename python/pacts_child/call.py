"""One decode call of the process protocol: the problem of an exchange directory
(spec/case_files.md section 4) and its buffers, read through the spec's layouts
(spec/operator.md section 3), and the results written back into the same directory."""
import json
import math
import os

import numpy as np

from . import formats

DEVERR_CONTEXT_LEN = 1 << 0  # spec/contract.md section 4, P1
DEVERR_PAGE_ID = 1 << 1      # P2


class NotSupported(Exception):
    """Raised by a decode function for a problem it cannot compute (the reply's status
    NotSupported; the message names the field and what is accepted)."""


class Call:
    """The problem (`problem`: the fields of problem.json) and its tensors.

    Raw storage, as in the exchange directory: `query`, `k_pages`, `v_pages` (codes),
    `block_table` (int32 [B, stride]), `context_lens` (int32 [B]), `sinks` (float32 [Hq] or None).
    Helpers give decoded float64 values through the layouts: `q(b, i, h)`, `keys(b, h_kv, j0, j1)`,
    `values(b, h_kv, j0, j1)`, and the spec's masks: `row_keys(b, i)`, `owned_columns(b)`.
    """

    def __init__(self, directory):
        self.dir = directory
        with open(os.path.join(directory, "problem.json"), encoding="utf-8") as f:
            self.problem = json.load(f)
        p = self.problem
        for key in ("batch", "q_len", "num_q_heads", "num_kv_heads", "head_dim", "page_size",
                    "num_pages", "max_pages_per_seq", "block_table_stride", "window"):
            setattr(self, key, int(p[key]))
        self.group = self.num_q_heads // self.num_kv_heads
        self.load = lambda name: np.load(os.path.join(directory, name + ".npy"))
        self.query = self.load("query")
        self.k_pages = self.load("k_pages")
        self.v_pages = self.load("v_pages")
        self.block_table = self.load("block_table").reshape(-1)
        self.context_lens = self.load("context_lens").reshape(-1)
        self.sinks = self.load("sinks").reshape(-1) if p["has_sinks"] else None

    # ---- the spec's masks (spec/operator.md sections 5-6, spec/contract.md section 1.1) ----

    def row_keys(self, b, i):
        """The keys row (b, i) sees, as a half-open range [j0, j1) (empty: j0 == j1)."""
        n = int(self.context_lens[b])
        pos = n - self.q_len + i
        if pos < 0:
            return 0, 0
        lo = max(0, pos - self.window + 1) if self.window > 0 else 0
        return lo, pos + 1

    def owned_columns(self, b):
        """Block-table columns sequence b owns, [k0, k1) (its context length must satisfy P1)."""
        n = int(self.context_lens[b])
        if n <= 0:
            return 0, 0
        lo = max(0, n - self.q_len - self.window + 1) if self.window > 0 else 0
        P = self.page_size
        return lo // P, (n - 1) // P + 1

    def device_error(self, b):
        """The PACTS_DEVERR_* bits of sequence b (spec/contract.md section 4), 0 when valid."""
        n = int(self.context_lens[b])
        if n < 0 or n > self.max_pages_per_seq * self.page_size:
            return DEVERR_CONTEXT_LEN
        k0, k1 = self.owned_columns(b)
        row = self.block_table[b * self.block_table_stride + k0: b * self.block_table_stride + k1]
        if np.any((row < 0) | (row >= self.num_pages)):
            return DEVERR_PAGE_ID
        return 0

    # ---- decoded values ----

    def _scale(self, which):
        mode = self.problem[f"{which}_scale_mode"]
        if mode == "none":
            return 1.0
        if mode == "per_tensor":
            return float(np.float32(self.problem[f"{which}_scale"]))
        raise NotSupported(f"{which}_scale_mode {mode}: accepted: none, per_tensor")

    def q(self, b, i, h):
        """Row (b, i, h) of the query, decoded and times q_scale (float64 [D])."""
        l = self.problem["q_layout"]
        at = b * l["s_batch"] + i * l["s_tok"] + h * l["s_head"]
        codes = self.query[at: at + self.head_dim]
        return formats.decode(codes, self.problem["q_format"]) * float(np.float32(self.problem["q_scale"]))

    def _pool(self, which, pool, b, h_kv, j0, j1):
        l = self.problem[f"{which}_layout"]
        P, D, C = self.page_size, self.head_dim, l["chunk"]
        j = np.arange(j0, j1)
        pages = self.block_table[b * self.block_table_stride + j // P].astype(np.int64)
        d = np.arange(D)
        at = (pages[:, None] * l["s_page"] + h_kv * l["s_head"] + (j % P)[:, None] * l["s_tok"]
              + (d // C)[None, :] * l["s_chunk"] + (d % C)[None, :])
        return formats.decode(pool[at], self.problem["kv_format"]) * self._scale(which)

    def keys(self, b, h_kv, j0, j1):
        """K of keys [j0, j1) of sequence b, KV head h_kv, decoded and scaled (float64 [n, D])."""
        return self._pool("k", self.k_pages, b, h_kv, j0, j1)

    def values(self, b, h_kv, j0, j1):
        """V of keys [j0, j1), as keys()."""
        return self._pool("v", self.v_pages, b, h_kv, j0, j1)

    # ---- results ----

    def write(self, out, lse=None):
        """Writes out (float64 [B, L, Hq, D]) rounded once to out_format at the out layout into
        out.npy, keeping the bytes of the allocation that are no element (the guard bytes pacts
        wrote), and lse ([B, L, Hq], natural log) as float32 into lse.npy when want_lse."""
        p = self.problem
        base = np.load(os.path.join(self.dir, "out.npy"))
        codes = formats.encode(out, p["out_format"])
        l = p["out_layout"]
        B, L, H, D = out.shape
        idx = (np.arange(B)[:, None, None, None] * l["s_batch"]
               + np.arange(L)[None, :, None, None] * l["s_tok"]
               + np.arange(H)[None, None, :, None] * l["s_head"]
               + np.arange(D)[None, None, None, :])
        base[idx] = codes
        np.save(os.path.join(self.dir, "out.npy"), base)
        if p["want_lse"]:
            lb = np.load(os.path.join(self.dir, "lse.npy"))
            ll = p["lse_layout"]
            idx = (np.arange(B)[:, None, None] * ll["s_batch"] + np.arange(L)[None, :, None] * ll["s_tok"]
                   + np.arange(H)[None, None, :] * ll["s_head"])
            lb[idx] = np.asarray(lse, dtype=np.float64).astype(np.float32)
            np.save(os.path.join(self.dir, "lse.npy"), lb)


def softmax_row(logits, values, sink=None):
    """o and the LSE of one row from its logits (float64 [n]) and values ([n, D]) by
    spec/operator.md section 9, in float64: the sink in the denominator only."""
    m = np.max(logits)
    if sink is not None and math.isfinite(sink):
        m_all = max(m, sink)
    else:
        m_all = m
        sink = None
    e = np.exp(logits - m_all)
    denom = np.sum(e) + (math.exp(sink - m_all) if sink is not None else 0.0)
    o = (e @ values) / denom
    lse = m + math.log(np.sum(np.exp(logits - m)))
    return o, lse
