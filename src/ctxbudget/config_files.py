"""Reading a configuration file (a policy, a catalog): its size bounded, its text decoded, and
each way it cannot be read one line naming the file."""

from __future__ import annotations

from pathlib import Path

from .errors import ConfigError

__all__ = ["CONFIG_FILE_BYTES", "read_config_text"]

# The most a policy or catalog file may hold: the bundled catalog of every model is 0.8 MB, a
# policy a few kB. Read whole, ``--policy /dev/zero`` took memory until the process was killed.
CONFIG_FILE_BYTES = 16 * 1024 * 1024


def read_config_text(path: str | Path, what: str) -> str:
    """The text of the ``what`` file (``"policy"``, ``"catalog"``) at ``path``, as a text-mode read
    gives it (UTF-8, line ends made ``\\n``); a :class:`ConfigError` when it cannot be read, is over
    :data:`CONFIG_FILE_BYTES` (a device, a stream that never ends) or is not UTF-8."""
    name = str(path)
    try:
        with open(path, "rb") as stream:
            data = stream.read(CONFIG_FILE_BYTES + 1)
    except (OSError, ValueError) as exc:  # ValueError: a path holding a NUL
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot read {what} file {name!r}: {reason}") from exc
    if len(data) > CONFIG_FILE_BYTES:
        raise ConfigError(
            f"{what} file {name!r} is over {CONFIG_FILE_BYTES // (1024 * 1024)} MiB: no {what} is that large"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} file {name!r} is not UTF-8 text (byte {exc.start}: {exc.reason})") from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")
