"""The KernelBench compatibility suite: public LLM-written solutions, our verdicts beside
KernelBench's own, and every disagreement named.

A corpus is a JSON-lines file of KernelBench problems and solutions in the shape CUDA-L1
released them (``optimized_cuda_code/<gpu>.jsonl``: ``level_id``, ``task_id``, ``ref_code``,
``custom_code``); corpora live in the ignored ``.corpus/`` folder and are never committed.
Steps (``python -m benchmarks.compat STEP --help``), each resumable:

  from-runs    a KernelBench "runs" folder (``level_<L>_problem_<P>_sample_<S>_kernel.py`` and
               its ``eval_results.json``) and the checkout it was made in -> a corpus, with
               KernelBench's recorded verdicts under ``kb_recorded`` (``public_runs.py``)
  prepare      a corpus -> SET/problems (a KernelBench-layout folder: ``level<L>/<n>_<name>.py``,
               so our problem-set loader gives ids ``L<L>_<n>_<name>``), SET/solutions
               (``<id>.py`` from ``custom_code``; rows without one are skipped and counted) and
               SET/manifest.json
  kernelbench  KernelBench's own evaluation of each solution (``eval_kernel_against_ref`` from a
               KernelBench checkout, imported as ``benchmarks/kernelbench_peer.py`` does; same
               seed before ``Model()`` and ``ModelNew()``, its correctness trials, no timing),
               several at a time, each in its own process and build folder ->
               SET/kernelbench.jsonl (``--backend triton``: its triton backend, from a tree
               that has one)
  ours         ``cuda-agent bench run`` over SET (``--policy kernelbench --baselines eager``) ->
               SET/ours/ (a bench run folder), with its wall time per segment
  table        both joined (``cuda_agent.bench.agreement``) -> Markdown for docs/compat.md:
               agreement counts per set, disagreements by reason class, and each disagreement

``gpu.sh`` runs them on an H200 pair (ours on one GPU, KernelBench on the other) inside a
deadline; ``benchmarks/recipes/public_corpus.sh`` calls it. See docs/compat.md.
"""
