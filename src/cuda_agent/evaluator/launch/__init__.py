"""Worker processes, started and held for the parent: what every evaluation runs its worker with.

Starting a worker (fresh, forked from a template, or in a sandbox: ``worker_spawn.py``,
``worker_template.py``), keeping spares ready (``spare_workers.py``), building the request it
gets (``requests.py``), running one request to its record under a deadline (``worker_process.py``)
and killing its process group afterwards (``process_group.py``), with its host memory watched
(``host_memory.py``). What it does not do: decide what a worker is asked (``checks/`` and the
pipeline do) or run candidate code (only ``worker/`` does, in the child). No re-exports: import
each name from the module that defines it.
"""
