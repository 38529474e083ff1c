"""Timed calls of the process protocol (spec/process.md section 6): pacts-bench times a child's
kernel beside its own on the same inputs. The kernel author splits decode in two:

    def prepare(call):                      # inputs to the device, plan, compile: not timed
        ...
        return pacts_child.Prepared(launch, result, clock=pacts_child.TorchCudaClock())

launch() runs the kernel on the prepared inputs (no copy to or from the host, no host sync);
result() returns (out, lse, device_error) of the last launch, as decode does. The clock decides
how a call is timed: TorchCudaClock (CUDA events around a CUDA graph replay of launch(), or around
launch() itself where capture fails, the L2 flushed before each by a device write) or HostClock
(time.perf_counter around launch(), the caches flushed by a host write)."""
import time

import numpy as np


class Prepared:
    """A prepared call: launch() and result() as the module says, timed by `clock`."""

    def __init__(self, launch, result, clock=None):
        self.launch = launch
        self.result = result
        self.clock = clock or HostClock()


class HostClock:
    """time.perf_counter around each launch(); `flush_bytes` bytes of a host buffer written
    before each."""

    def setup(self, prepared, flush_bytes):
        self.prepared = prepared
        self.flush = np.zeros(max(int(flush_bytes), 1), dtype=np.uint8)
        return f"host clock (time.perf_counter) around each launch(), {self.flush.size} bytes written before each"

    def time(self, reps):
        times = []
        for i in range(reps):
            self.flush[::64] = (i + 1) & 0xFF
            t0 = time.perf_counter()
            self.prepared.launch()
            times.append(max((time.perf_counter() - t0) * 1e6, 1e-3))
        return times


class TorchCudaClock:
    """CUDA events (PyTorch) around each call on the current stream, `flush_bytes` bytes of a
    device buffer written before each (the L2 flushed, as pacts-bench does for its own kernels).
    With graph=True, launch() is captured once in a CUDA graph and each call is a replay (the
    launch latency a graph hides is not timed, as for pacts' kernels); where capture fails the
    calls are direct launches and the method says why."""

    def __init__(self, graph=True):
        self.graph = graph

    def setup(self, prepared, flush_bytes):
        import torch

        self.torch = torch
        self.prepared = prepared
        self.flush = torch.empty(max(int(flush_bytes), 1), dtype=torch.uint8, device="cuda")
        self.replay = prepared.launch
        how = "direct launches (graph capture not asked)"
        if self.graph:
            try:
                g = torch.cuda.CUDAGraph()
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    prepared.launch()  # warm on the capture stream
                torch.cuda.current_stream().wait_stream(side)
                with torch.cuda.graph(g):
                    prepared.launch()
                g.replay()
                torch.cuda.synchronize()
                self.replay = g.replay
                self._graph = g
                how = "CUDA graph replays"
            except Exception as e:  # capture refused: time direct launches and say so
                torch.cuda.synchronize()
                how = f"direct launches (graph capture failed: {type(e).__name__}: {str(e)[:80]})"
        return (f"CUDA events around each call, {how}, {self.flush.numel()} bytes written on the "
                "device before each")

    def time(self, reps):
        torch = self.torch
        times = []
        for i in range(reps):
            self.flush.fill_((i + 1) & 0xFF)
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            self.replay()
            stop.record()
            stop.synchronize()
            times.append(max(start.elapsed_time(stop) * 1e3, 1e-3))
        return times
