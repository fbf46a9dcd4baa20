"""Versioned contracts between migscope's parts; :mod:`migscope.core.spec.v1` is the current one."""
