"""A paged decode kernel in NumPy, served to pacts: binary64 throughout, the output rounded once.

    pacts-conformance --backend "exec:python3 python/examples/numpy_decode.py"
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pacts_child  # noqa: E402


# A planted fault for the package's own test (never set in use): "window_plus_one" lets each
# row see one key before its window, the off-by-one of spec/operator.md section 6's table.
FAULT = os.environ.get("PACTS_NUMPY_FAULT", "")


def decode(call):
    B, L, Hq, D = call.batch, call.q_len, call.num_q_heads, call.head_dim
    out = np.zeros((B, L, Hq, D))
    lse = np.full((B, L, Hq), -np.inf)
    tau = float(np.float32(call.problem["softmax_scale"]))
    cap = float(np.float32(call.problem["softcap"]))
    error = 0
    for b in range(B):
        bad = call.device_error(b)
        if bad:  # spec/contract.md section 4: the sequence's rows are NaN, nothing is read
            error |= bad
            out[b] = np.nan
            lse[b] = np.nan
            continue
        for i in range(L):
            j0, j1 = call.row_keys(b, i)
            if FAULT == "window_plus_one" and call.window > 0 and j0 > 0:
                j0 -= 1
            if j0 == j1:
                continue  # an empty row: +0 and LSE -inf (spec/operator.md section 10)
            for h_kv in range(call.num_kv_heads):
                k = call.keys(b, h_kv, j0, j1)
                v = call.values(b, h_kv, j0, j1)
                for h in range(h_kv * call.group, (h_kv + 1) * call.group):
                    s = tau * (k @ call.q(b, i, h))
                    if cap > 0:
                        s = cap * np.tanh(s / cap)
                    sink = float(call.sinks[h]) if call.sinks is not None else None
                    out[b, i, h], lse[b, i, h] = pacts_child.softmax_row(s, v, sink)
    return out, (lse if call.problem["want_lse"] else None), error


def prepare(call):
    """The timed form (spec/process.md section 6): each launch is a whole decode on the host."""
    state = {}

    def launch():
        state["result"] = decode(call)

    return pacts_child.Prepared(launch, lambda: state["result"], pacts_child.HostClock())


if __name__ == "__main__":
    sys.exit(pacts_child.serve(decode, name="numpy-decode", device="cpu (NumPy)", prepare=prepare))
