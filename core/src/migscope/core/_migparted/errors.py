"""The two ways a mig-parted config goes wrong for its reader: it cannot be read, or it clashes.

Both are :class:`~migscope.core._errors.UserError`: a person wrote the file (or chose to merge
into one) and can fix it. They live apart from the schema because the reader, the writer and
the merger all raise them.
"""

from __future__ import annotations

from collections.abc import Sequence

from migscope.core._errors import UserError


class ConfigError(UserError, ValueError):
    """A mig-parted config that cannot be read: YAML syntax or schema.

    Attributes:
        line: 1-based line of the first problem, or None when it has no place in the text.
        message: What is wrong, without the line.
        problems: Every ``(line, message)`` found, first one first; schema validation finds
            them all at once, and a caller may want to show more than the first.
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        problems: Sequence[tuple[int | None, str]] = (),
    ) -> None:
        self.line = line
        self.message = message
        self.problems = tuple(problems) or ((line, message),)
        super().__init__(self.__str__())

    def __str__(self) -> str:
        more = len(self.problems) - 1
        tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else ""
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.message}{tail}"


class ConfigConflictError(UserError, ValueError):
    """Merging would silently overwrite a named config with different content."""
