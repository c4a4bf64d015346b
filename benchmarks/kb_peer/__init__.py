"""KernelBench as the peer, in parts; ``benchmarks/kernelbench_peer.py`` is the command line.

  kb_import     import KernelBench's evaluator from a checkout; its provenance, the environment
  kb_calls      the arguments of its scripts and small adapters around its evaluator's calls
  report        JSON, tables, numbers, the log KernelBench's output goes to
  problems      problem lists and the reference -> ``ModelNew`` transform
  worker        one task in its own process (``kernelbench_peer.py _worker``)
  self_speedup, build, stream, cpu_modes   the modes

Nothing of KernelBench is copied here.
"""
