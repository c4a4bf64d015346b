"""The names of a memory error, shared by the evaluation's guarded trial (``red_zones.py``, in
the worker) and the memory check (``evaluator/checks/memory_safety.py``, in the parent), and of
a device fault, which the worker reports (``verify.raised``) and the parent asks the memory
check to name (``pipeline.py``). Torch-free."""

FLAG_ACCESS = "memory_error:access"  # a read or write outside the candidate's buffers
FLAG_UNINITIALIZED = "memory_error:uninitialized"  # a read of memory nobody wrote
# not a memory error: wrong on the memory check's own seed, right (filled) on verification's
FLAG_WRONG_ON_CHECK_SEED = "output_mismatch:check_seed"
# the GPU stopped one of the candidate's kernels on a bad address (beside ``forward_raised``);
# the CUDA context is lost, so the worker cannot tell more: the memory check names the access
FLAG_DEVICE_FAULT = "device_fault"
# CUDA's own text for the faults of an address (cudaErrorIllegalAddress, 700, and
# cudaErrorMisalignedAddress, 716), as torch's AcceleratorError carries it
DEVICE_FAULT_TEXTS = ("an illegal memory access was encountered", "misaligned address")


def is_device_fault(message: str) -> bool:
    """Whether an error's text is CUDA's report of a kernel stopped on a bad address."""
    return any(text in message for text in DEVICE_FAULT_TEXTS)
