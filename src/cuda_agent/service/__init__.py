"""The reward as an HTTP service: trainers on other machines submit evaluations and get results.

``cuda-agent serve --http HOST:PORT`` runs ``app.py`` (FastAPI on uvicorn) over a job store
(``store.py``, SQLite: a job is written before it is acknowledged, and a service killed and
started again finishes every acknowledged job exactly once) and a scheduler (``scheduler.py``)
that feeds the jobs to an evaluation pool (LocalPool over the host's GPUs, or RayPool on a
cluster). ``auth.py`` maps bearer tokens to tenants (each sees only its own jobs),
``payload.py`` turns a request into a problem and a solution (workdir archives checked member
by member), ``results.py`` strips what a result must not carry out (the hidden seed, the
harness's paths), ``metrics.py`` renders Prometheus text, and ``client.py`` is the async client
that trainers, ``bench run --service`` and ``cuda-agent eval --service`` use.

The local-socket service of one machine (``cuda-agent serve`` without ``--http``) is
``evaluator/service.py``; it is not this.
"""
