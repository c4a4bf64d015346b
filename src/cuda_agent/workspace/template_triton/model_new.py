"""Your solution: ModelNew, same __init__ arguments and parameter names as Model in model.py.

Replace this placeholder (a copy of the reference) with launches of your Triton kernels:

    from kernels.my_op import my_op_kernel
    ...
    my_op_kernel[grid](x, y, n, BLOCK=1024)
    return y
"""
