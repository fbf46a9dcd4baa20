"""The one error a web-config file raises, naming the file and the key in one line.

The schema's validators, the TLS context builder and the loader all
raise it, and the schema builds the TLS context, so the error lives below all three.
"""

from __future__ import annotations

import os

from migscope.core import UserError


class WebConfigError(UserError, ValueError):
    """A web-config file that cannot be used; its text is one line naming file and key.

    Attributes:
        path: The file as the user named it.
        key: Where the problem is, named as every migscope reader names a place
            (``tls_server_config.cert_file``, ``basic_auth_users["alice@example.org"]``), or
            None when the problem is the whole file (unreadable, not YAML).
        message: What is wrong, without file and key.
    """

    def __init__(self, message: str, *, path: str | os.PathLike[str], key: str | None) -> None:
        self.path = os.fspath(path)
        self.key = key
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.key}: " if self.key else ""
        return f"web-config {self.path}: {where}{self.message}"
