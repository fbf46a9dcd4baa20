"""A fake of DCGM's Python bindings, laid out like the real bindings directory.

THIS IS A FAKE, for tests. DCGM is not on PyPI and cannot be installed here, so the ``dcgm``
backend is tested against modules with the real bindings' names and call surface
(``dcgm_structs``, ``dcgm_fields``, ``dcgm_agent``, ``dcgmvalue``): point the backend's
``bindings=`` at this directory and it imports them exactly as it would import
``/usr/share/datacenter-gpu-manager-4/bindings/python3``.

Beneath those modules, :mod:`support.fake_dcgm.hostengine` plays ``libdcgm.so.4`` and
nv-hostengine: simulated GPUs, GPU instances and field values that a test sets, plus the
faults a real node shows (unreachable hostengine, missing library, lost GPU, per-field errors,
MIG re-partitioning). Each module's docstring says which real source each semantic follows.
The binding modules reach the hostengine through that package path, so ``tests/`` must be on
``sys.path`` (pytest's ``pythonpath`` setting does it).
"""
