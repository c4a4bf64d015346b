"""The worker's modes: one module per mode of a request, each with ``run(request, channel)``.

``worker/__main__.py`` imports ``modes.<mode>`` by the request's mode name, so a module here
is named after its mode and nothing else lives here; the stages and helpers a mode uses are
the modules one level up (``worker/``). The mode table is in ``worker/__init__.py``. No
re-exports: import each name from the module that defines it.
"""
