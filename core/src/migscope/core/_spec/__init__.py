"""Versioned contracts between migscope's parts; :mod:`.v1` is the current one."""
