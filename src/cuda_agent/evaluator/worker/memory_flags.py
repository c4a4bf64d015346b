"""The names of a memory error, shared by the evaluation's guarded trial (``red_zones.py``, in
the worker) and the memory check (``evaluator/checks/memory_safety.py``, in the parent).
Torch-free."""

FLAG_ACCESS = "memory_error:access"  # a read or write outside the candidate's buffers
FLAG_UNINITIALIZED = "memory_error:uninitialized"  # a read of memory nobody wrote
# not a memory error: wrong on the memory check's own seed, right (filled) on verification's
FLAG_WRONG_ON_CHECK_SEED = "output_mismatch:check_seed"
