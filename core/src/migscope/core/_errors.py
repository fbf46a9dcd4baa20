"""The root of every error migscope raises on purpose, and the rule for how each reaches a user.

Two kinds, told apart by class and nothing else:

- :class:`UserError`: input, configuration or environment the user can fix (a bad file, an
  unknown GPU model, a Prometheus that does not answer, a node plan that is too old). Every
  command prints it as one line, ``migscope: error: <message>``, and exits 1. The message
  says what is wrong and where; the underlying exception, if any, is chained as
  ``__cause__`` (``raise ... from exc``) so that ``MIGSCOPE_DEBUG=1`` shows the whole story.
- Anything else is a bug and keeps its traceback.

Library code raises subclasses of these; only the command entry points catch them. Domain
errors that pydantic validators raise also derive from :class:`ValueError` (pydantic turns
only ``ValueError``/``AssertionError`` into validation errors), which is why several classes
name both.
"""

from __future__ import annotations


class MigscopeError(Exception):
    """Root of the exceptions migscope defines, so that callers can catch all of them at once."""


class UserError(MigscopeError):
    """Something the user can fix; printed as one line without a traceback."""


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (newlines folded), never empty.

    Why: messages quote server answers and file contents, which may hold newlines; a one-line
    error must stay one line in a terminal and in JSON logs.
    """
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
