"""pacts_child: a decode kernel written in Python (NumPy, PyTorch, CuPy, ...) served to pacts over
its process protocol (spec/process.md), so that the whole catalogue judges it:

    import pacts_child
    def decode(call): ...                     # Call -> (out, lse, device_error)
    pacts_child.serve(decode, name="my-kernel", device="cpu")

and, from a shell: pacts-conformance --backend "exec:python3 my_kernel.py".
Pure Python and NumPy; PyTorch or CuPy only where a kernel uses them."""
from .call import Call, NotSupported, softmax_row, DEVERR_CONTEXT_LEN, DEVERR_PAGE_ID
from .protocol import serve, capabilities, FLOAT64_NUMERICS, PROTOCOL_VERSION
from .timing import Prepared, HostClock, TorchCudaClock

__all__ = ["Call", "NotSupported", "softmax_row", "serve", "capabilities", "FLOAT64_NUMERICS",
           "PROTOCOL_VERSION", "DEVERR_CONTEXT_LEN", "DEVERR_PAGE_ID", "Prepared", "HostClock",
           "TorchCudaClock"]
