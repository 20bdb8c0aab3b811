"""``blobstate.model.names``: the names a snapshot may hold, under Hypothesis: every name is accepted or refused
with ``UnsafePathError`` (nothing else), names that are not UTF-8 come back as the same bytes, and the limits of
depth and length hold."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blobstate.errors import UnsafePathError
from blobstate.model.names import MAX_DEPTH, NAME_MAX, PATH_MAX, check_name, check_relpath, name_bytes

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.text(max_size=300))
def test_a_name_is_one_component_or_an_unsafe_path_error(name):
    try:
        assert check_name(name) == name
    except UnsafePathError:
        if _encodable(name):  # else: no file name on this system at all
            assert not name or name in (".", "..") or "/" in name or "\x00" in name or len(os.fsencode(name)) > NAME_MAX
    else:
        assert name not in (".", "..") and "/" not in name and "\x00" not in name
        assert 0 < len(name_bytes(name)) <= NAME_MAX


def _encodable(name: str) -> bool:
    try:
        os.fsencode(name)
    except UnicodeEncodeError:
        return False
    return True




@FAST
@given(st.binary(min_size=1, max_size=60).filter(lambda b: b"/" not in b and b"\x00" not in b and b.strip(b".")))
def test_a_name_that_is_not_utf8_comes_back_as_the_same_bytes(raw):
    name = os.fsdecode(raw)
    assert check_name(name) == name and name_bytes(name) == raw


@pytest.mark.parametrize("relative", ["", "/abs", "a//b", "a/", "./a", "a/../b", "a/\x00", "n" * 256])
def test_paths_refused_by_name(relative):
    with pytest.raises(UnsafePathError):
        check_relpath(relative)


def test_depth_and_length_limits():
    assert len(check_relpath("/".join(["d"] * (MAX_DEPTH + 1)))) == MAX_DEPTH + 1
    with pytest.raises(UnsafePathError, match="deeper"):
        check_relpath("/".join(["d"] * (MAX_DEPTH + 2)))
    longest = "/".join(["n" * 255] * 16)[:PATH_MAX]
    assert check_relpath(longest.rstrip("/"))
    with pytest.raises(UnsafePathError, match=f"longer than {PATH_MAX}"):
        check_relpath("/".join(["n" * 255] * 17))
    with pytest.raises(UnsafePathError, match=f"longer than {NAME_MAX}"):
        check_name("é" * 128)  # 128 characters, 256 bytes
