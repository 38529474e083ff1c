"""The child side of pacts' process protocol, version 1 (spec/process.md): a handshake line, then
one reply line per request, buffers in exchange directories."""
import json
import sys
import traceback

import numpy as np

from .call import Call, NotSupported

PROTOCOL_VERSION = 1

# spec/tolerance.md section 2: a kernel that computes in binary64 and rounds its output once.
FLOAT64_NUMERICS = {
    "u_logit": 2.0 ** -53, "u_q": 0.0, "u_p": 0.0, "eta_p": 0.0, "u_acc": 2.0 ** -53,
    "u_partial": 0.0, "eps_exp": 2.0 ** -51, "eps_tanh": 2.0 ** -51, "eps_log": 2.0 ** -51,
    "p_rounded_in_denominator": False, "ftz": False,
}


def capabilities(**overrides):
    """A capability declaration (the fields of pacts_backend_capabilities, pacts/backend_abi.h)
    with these defaults: bf16 / fp16 query and KV without scales or with per-tensor ones, every
    output format, D 64 / 128 / 256, pages 8 to 256, L up to 16, any group, every layout, sinks,
    window, soft-cap and LSE, deterministic, no plan hints, no replay, 1-byte alignment."""
    caps = {
        "q_formats": ["bf16", "fp16"], "kv_formats": ["bf16", "fp16"],
        "out_formats": ["bf16", "fp16", "fp32"], "scale_modes": ["none", "per_tensor"],
        "head_dims": [64, 128, 256], "min_page_size": 8, "max_page_size": 256,
        "max_q_len": 16, "max_group": 64, "chunked_layouts": True, "sinks": True,
        "window": True, "softcap": True, "lse": True, "deterministic": True,
        "split_plans": False, "plan_replay": False, "large_buffers": False,
        "vector_alignment_bytes": 1, "max_element_offset": 2 ** 62,
    }
    for key, value in overrides.items():
        if key not in caps:
            raise KeyError(f"capabilities: {key} is no field of pacts_backend_capabilities")
        caps[key] = value
    return caps


def unsupported(problem, caps):
    """Why `problem` lies outside the declared capabilities (the field, its value and what is
    declared), or None. The reply to such a problem is NotSupported (PACTS-REFUSE-2)."""
    checks = [
        ("q_format", problem["q_format"] in caps["q_formats"], caps["q_formats"]),
        ("kv_format", problem["kv_format"] in caps["kv_formats"], caps["kv_formats"]),
        ("out_format", problem["out_format"] in caps["out_formats"], caps["out_formats"]),
        ("k_scale_mode", problem["k_scale_mode"] in caps["scale_modes"], caps["scale_modes"]),
        ("v_scale_mode", problem["v_scale_mode"] in caps["scale_modes"], caps["scale_modes"]),
        ("head_dim", problem["head_dim"] in caps["head_dims"], caps["head_dims"]),
        ("page_size", caps["min_page_size"] <= problem["page_size"] <= caps["max_page_size"],
         f"{caps['min_page_size']} to {caps['max_page_size']}"),
        ("q_len", problem["q_len"] <= caps["max_q_len"], f"1 to {caps['max_q_len']}"),
        ("num_q_heads / num_kv_heads", problem["num_q_heads"] // problem["num_kv_heads"] <= caps["max_group"],
         f"a group of at most {caps['max_group']}"),
        ("has_sinks", caps["sinks"] or not problem["has_sinks"], "false"),
        ("window", caps["window"] or problem["window"] == 0, "0"),
        ("softcap", caps["softcap"] or problem["softcap"] == 0, "0"),
        ("want_lse", caps["lse"] or not problem["want_lse"], "false"),
        ("k_layout.chunk / v_layout.chunk",
         caps["chunked_layouts"] or (problem["k_layout"]["chunk"] == problem["head_dim"]
                                     and problem["v_layout"]["chunk"] == problem["head_dim"]),
         "head_dim (rows in one chunk)"),
    ]
    for field, ok, accepted in checks:
        if not ok:
            value = problem.get(field, "")
            return f"{field} {value}: not declared (accepted: {accepted})"
    return None


def serve(decode, name, device, caps=None, numerics=None, variant=None, stdin=None, stdout=None,
          prepare=None):
    """Serves `decode` until pacts sends exit or closes the pipe.

    decode(call) gets a Call (pacts_child.call) and returns (out, lse, device_error): out a float
    array [B, L, Hq, D] of the exact results before the final rounding (the package rounds once
    to the output format), lse [B, L, Hq] (natural log, the sink excluded) or None when the
    problem does not ask for it, and the PACTS_DEVERR_* bits. It raises NotSupported for a
    problem outside what it computes.

    prepare(call), optional, returns a pacts_child.Prepared (pacts_child.timing): with it the
    child declares timed calls and pacts-bench can time the kernel beside pacts' own
    (spec/process.md section 6)."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    caps = caps or capabilities()
    numerics = numerics or dict(FLOAT64_NUMERICS)
    hello = {"protocol": "pacts-process", "version": PROTOCOL_VERSION, "name": name,
             "device": device, "capabilities": caps, "numerics": numerics}
    if prepare is not None:
        hello["timed_calls"] = True
    stdout.write(json.dumps(hello) + "\n")
    stdout.flush()
    prepared = None
    for line in stdin:
        request = json.loads(line)
        op = request.get("op")
        if op == "exit":
            return 0
        if prepare is not None and op in ("time", "time_end"):
            reply = {"id": request["id"], "status": "ok", "message": ""}
            if prepared is None:
                reply["status"], reply["message"] = "InvalidArgument", f"{op}: no call prepared (time_prepare first)"
            elif op == "time_end":
                prepared = None
            else:
                try:
                    reply["times_us"] = [float(t) for t in prepared.clock.time(int(request["reps"]))]
                except Exception as e:
                    traceback.print_exc(file=sys.stderr)
                    reply["status"], reply["message"] = "Internal", f"{type(e).__name__}: {e}"
            stdout.write(json.dumps(reply) + "\n")
            stdout.flush()
            continue
        if op != "run" and not (prepare is not None and op == "time_prepare"):
            # run_replayed only reaches a child that declares plan_replay
            sys.stderr.write(f"pacts_child: not a request this child serves: {line}")
            return 2
        reply = {"id": request["id"], "status": "ok", "message": "", "device_error": 0,
                 "plan": {"partition_size": 0, "max_partitions": 1, "variant": variant or name}}
        try:
            call = Call(request["dir"])
            why = unsupported(call.problem, caps)
            if why is not None:
                raise NotSupported(why)
            if op == "time_prepare":
                prepared = None
                ready = prepare(call)
                ready.launch()  # the untimed first call, whose results pacts checks
                out, lse, device_error = ready.result()
                reply["method"] = ready.clock.setup(ready, request.get("flush_bytes", 0))
                prepared = ready
            else:
                out, lse, device_error = decode(call)
            call.write(np.asarray(out, dtype=np.float64), lse)
            reply["device_error"] = int(device_error)
        except NotSupported as e:
            reply["status"], reply["message"] = "NotSupported", str(e)
        except Exception as e:  # a bug of the kernel: Internal, with its traceback on stderr
            traceback.print_exc(file=sys.stderr)
            reply["status"], reply["message"] = "Internal", f"{type(e).__name__}: {e}"
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()
    return 0
