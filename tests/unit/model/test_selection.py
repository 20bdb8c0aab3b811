"""``blobstate.model.selection.select_checkpoint``: an exact id, then ``latest``, then a retained generation, then
a unique prefix; typed errors for the rest."""

from __future__ import annotations

import pytest

from blobstate.errors import ConfigurationError, NothingToRestore
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.model.selection import select_checkpoint

KEY = StoreKey("j", "0", "s")


def cp(gen: int, cid: str) -> Checkpoint:
    return Checkpoint(KEY, cid, gen, f"{KEY.prefix}/indexes/{gen:032x}.json", 1, 1, 0)


HISTORY = [cp(1, "1700000000000-aaaa0001"), cp(2, "1700000000001-bbbb0002"), cp(3, "1700000000001-bbbc0003"),
           cp(4, "latest"), cp(5, "2")]


@pytest.mark.parametrize("spec, generation", [
    ("1700000000000-aaaa0001", 1),  # an exact id
    ("latest", 4),  # an exact id wins over the symbolic name
    ("2", 5),  # ... and over a generation
    (" 1700000000001-bbbc ", 3),  # a unique prefix, spaces ignored
    (1, 1),  # a generation given as a number
    ("3", 3),
    ("1700000000000-a", 1),
])
def test_a_spec_names_one_checkpoint(spec, generation):
    assert select_checkpoint(HISTORY, spec, KEY).generation == generation


def test_latest_is_the_newest_record_and_nothing_when_there_is_none():
    history = HISTORY[:3]
    assert select_checkpoint(history, "latest").generation == 3
    with pytest.raises(NothingToRestore, match="no checkpoint for j/0/s"):
        select_checkpoint([], "latest", KEY)


def test_an_ambiguous_prefix_is_a_usage_error_naming_the_candidates():
    with pytest.raises(ConfigurationError, match="ambiguous.*1700000000001-bbbb0002, 1700000000001-bbbc0003"):
        select_checkpoint(HISTORY, "1700000000001-bbb", KEY)


@pytest.mark.parametrize("spec", ["9", "nope", "1800", "²", "٣", "1" * 5000])
def test_nothing_matching_lists_what_is_retained(spec):
    with pytest.raises(NothingToRestore, match="retained generation:id: 1:1700000000000-aaaa0001"):
        select_checkpoint(HISTORY, spec, KEY)


@pytest.mark.parametrize("spec", ["", "   "])
def test_an_empty_name_is_a_usage_error(spec):
    with pytest.raises(ConfigurationError, match="empty checkpoint name"):
        select_checkpoint(HISTORY, spec, KEY)
