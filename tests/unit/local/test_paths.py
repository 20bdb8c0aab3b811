"""``blobstate.local.paths``: the joins a restore makes, under Hypothesis: an accepted path never leaves its root,
and a join through a link out of the root is refused."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blobstate.errors import UnsafePathError
from blobstate.local.paths import safe_join

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.text(alphabet=st.sampled_from("ab./\x00\\:"), max_size=40))
def test_an_accepted_relative_path_joins_inside_its_root(tmp_path_factory, relative):
    root = str(tmp_path_factory.getbasetemp() / "root")
    try:
        joined = safe_join(root, relative)
    except UnsafePathError:
        return
    real_root = os.path.realpath(root)
    assert os.path.commonpath([real_root, joined]) == real_root and joined != real_root
    assert joined == os.path.join(real_root, *relative.split("/"))


def test_a_join_through_a_link_out_of_the_root_is_refused(tmp_path):
    root = tmp_path / "root"
    (root / "inside").mkdir(parents=True)
    os.symlink(str(tmp_path), root / "out")
    os.symlink("inside", root / "ok")
    with pytest.raises(UnsafePathError, match="outside the destination"):
        safe_join(str(root), "out/x")
    assert safe_join(str(root), "ok/x") == os.path.join(os.path.realpath(root), "ok", "x")  # a link inside is fine
