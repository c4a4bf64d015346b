"""Your solution: ModelNew, same __init__ arguments and parameter names as Model in model.py.

Replace this placeholder (a copy of the reference) with calls to your kernels:

    import cuda_extension
    ...
    return cuda_extension.my_op(x)
"""
