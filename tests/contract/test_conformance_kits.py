"""The three conformance kits take one shape: a contract class with one abstract factory that the backend's test
class implements (like eventsourcing's ``create_recorder()``); forgetting it is an error, never a silent pass."""

from __future__ import annotations

import inspect

import pytest

from blobstate.testing.blobstores import BlobStoreContract
from blobstate.testing.checkpoint_logs import CheckpointLogContract
from blobstate.testing.local_stores import LocalStoreContract

KITS = {BlobStoreContract: "create_store", CheckpointLogContract: "create_log", LocalStoreContract: "create_harness"}


@pytest.mark.parametrize("kit", list(KITS), ids=lambda k: k.__name__)
def test_each_kit_has_one_abstract_factory_taking_no_fixtures(kit):
    factory = KITS[kit]
    assert factory in kit.__abstractmethods__
    assert [n for n in kit.__abstractmethods__ if n.startswith("create_") and n != factory] in ([],
                                                                                               ["create_unreachable_log"])
    assert list(inspect.signature(getattr(kit, factory)).parameters) == ["self"]


@pytest.mark.parametrize("kit", list(KITS), ids=lambda k: k.__name__)
def test_a_test_class_without_the_factory_cannot_run(kit):
    forgetful = type("TestForgetful", (kit,), {})
    with pytest.raises(TypeError, match=KITS[kit]):
        forgetful()
