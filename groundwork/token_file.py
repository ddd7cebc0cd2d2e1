"""Reading a bearer token from a file (a mounted Secret).

The scaler requires a token on ``/v1/stats`` and ``/v1/activate``; the
activator sends it. Both take it from the environment or from a file, never
preferably from a flag (every user of the machine sees flags in ``ps``).

Main decision: surrounding whitespace is dropped (a Secret written with
``echo`` ends in a newline) but whitespace *inside* is refused: a file
holding two words is a mistake (a pasted header, ``Bearer xyz``), and
sending it would fail every report with a 401 that does not say why.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["read_token"]


def read_token(path: Path, *, setting: str) -> str:
    """The token in ``path``; :class:`ValueError` naming ``setting`` when it has none."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(
            f"{setting}: cannot read {str(path)!r}: {exc}; allowed: a readable UTF-8 file"
        ) from None
    if not token:
        raise ValueError(
            f"{setting}: {str(path)!r} is empty; allowed: a file holding the bearer token"
        )
    if any(c.isspace() for c in token):
        raise ValueError(
            f"{setting}: {str(path)!r} holds no usable token (whitespace inside); allowed: "
            "the bearer token alone, surrounding whitespace is ignored"
        )
    return token
