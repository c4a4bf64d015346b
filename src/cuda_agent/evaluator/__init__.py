"""The evaluator: a problem and a candidate solution in, one verdict and its reward out.

Its parts, lowest first (each subpackage's ``__init__.py`` says more; nothing is re-exported):

* ``builder/``: turns a solution's sources into a loadable extension (light headers, nvcc,
  build caches, confined compilers). Knows nothing of workers, verdicts or rewards.
* ``worker/``: the child process, the only code that runs candidate code and touches the
  device (``python -m cuda_agent.evaluator.worker``); ``worker/modes/`` holds one module per
  request mode. Needs torch, numpy and the standard library; never imports the parent side.
* ``launch/``: starts, keeps and kills worker processes, builds their requests and reads their
  records back. Does not decide what a worker is asked or what its record means.
* ``device_budget.py`` (how long a candidate may keep its device) and ``options.py`` (one
  evaluation's options, with the paper's defaults, validated once).
* ``checks/``: what a verdict passes through or asks a worker for besides the evaluation
  itself: the problem's runtime check and task lint, memory safety, the torch.compile
  baseline, other shapes, Nsight Compute metrics. Does not order the stages.
* The entry modules: ``pipeline.py`` (``evaluate``: the stages in order), ``prepared.py`` (an
  evaluation after its CPU stages), ``follow_ups.py`` (memory check and compile baseline beside
  the timing), ``reward.py`` (the reward of a verdict), ``workspace_commands.py`` (compile,
  verify, profile for agents), ``prewarm.py`` (a process's imports paid before its first job),
  ``service.py`` (the local evaluation service, warm workers kept ready).

The evaluator is layered (imports point down, or sideways within a layer): ``builder`` <-
``worker`` <- ``launch``, ``device_budget``, ``options`` <- ``checks`` <- ``follow_ups``,
``pipeline``, ``prepared``, ``prewarm``, ``reward``, ``service``, ``workspace_commands``; and
outside the evaluator, ``worker`` imports only ``core`` and ``workspace`` (tests/test_structure.py
checks both, as it checks the package's layers).
"""
