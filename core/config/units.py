"""Human units for sizes, durations and times, as the CLI and the API accept and print them.

- Sizes: ``64MiB``, ``1.5 GiB``, ``512KiB`` (binary, IEC), ``64MB``, ``1GB`` (decimal, SI), ``4096`` or ``4096B``
  (bytes). Printed in IEC units: ``64.0 MiB``.
- Durations: ``500ms``, ``30s``, ``15m``, ``12h``, ``1d``, ``2w``, combinations such as ``1h30m``, a plain number
  of milliseconds (``86400000``, what the options took before), or a ``datetime.timedelta``. Printed as
  ``1d``, ``2h 30m``, ``850 ms``.
- Times: ISO 8601 in UTC with milliseconds, ``2024-05-01T12:00:00.123Z``.

Bad input raises ``ConfigurationError`` (exit code 2) naming the accepted forms.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from blobstate.errors import ConfigurationError

#: A duration as the API takes it: an int (milliseconds), a ``timedelta``, or text such as ``"1d"``, ``"90s"``.
Duration = int | str | timedelta
#: A size as the API takes it: an int (bytes) or text such as ``"64MiB"``, ``"500MB"``.
Size = int | str
#: Storage or log options as the API takes them (fsspec/obstore keywords), None for none.
Options = dict[str, Any] | None

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3, "t": 1000**4, "tb": 1000**4,
    "p": 1000**5, "pb": 1000**5,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_DURATION_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000,
                      "w": 7 * 86_400_000}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|min|s|m|h|d|w)", re.IGNORECASE)


def parse_size(value: str | int) -> int:
    """Bytes in ``value`` (``64MiB``, ``64MB``, ``4096``); raises ``ConfigurationError`` when it is not a size."""
    if isinstance(value, bool):
        raise ConfigurationError(f"not a size: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ConfigurationError(f"a size cannot be negative: {value}")
        return value
    match = _SIZE.match(value)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _SIZE_UNITS:
        raise ConfigurationError(f"not a size: {value!r} (examples: 64MiB, 1GiB, 500MB, 4096)")
    return int(float(match.group(1)) * _SIZE_UNITS[unit])


def parse_duration_ms(value: str | int | float | timedelta) -> int:
    """Milliseconds in ``value`` (``1d``, ``12h``, ``1h30m``, ``500ms``, a plain number of ms, a ``timedelta``);
    raises ``ConfigurationError`` when it is not a duration."""
    if isinstance(value, bool):
        raise ConfigurationError(f"not a duration: {value!r}")
    if isinstance(value, timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, (int, float)):
        if value < 0:
            raise ConfigurationError(f"a duration cannot be negative: {value}")
        return int(value)
    text = value.strip().replace(" ", "")
    if re.fullmatch(r"\d+", text):
        return int(text)
    parts = _DURATION_PART.findall(text)
    if not text or "".join(n + u for n, u in parts).lower() != text.lower():
        raise ConfigurationError(f"not a duration: {value!r} (examples: 1d, 12h, 1h30m, 90s, 500ms)")
    return int(sum(float(n) * _DURATION_UNITS_MS[u.lower()] for n, u in parts))


def format_size(nbytes: int | None) -> str:
    """``1536`` -> ``1.5 KiB``; ``None`` -> ``?``."""
    if nbytes is None:
        return "?"
    if nbytes < 1024:
        return f"{nbytes} B"
    value = float(nbytes)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if value < 1024 or unit == "PiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def format_duration(ms: float | None) -> str:
    """``86400000`` -> ``1d``; ``9000000`` -> ``2h 30m``; ``850`` -> ``850 ms``; ``None`` -> ``?``."""
    if ms is None:
        return "?"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    out = []
    rest = int(ms // 1000)
    for unit, seconds in (("w", 604_800), ("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, seconds)
        if count:
            out.append(f"{count}{unit}")
    return " ".join(out[:2])


def iso_time(ms: int | None) -> str | None:
    """Milliseconds since the epoch as ISO 8601 UTC with milliseconds (``2024-05-01T12:00:00.123Z``)."""
    if ms is None:
        return None
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
