"""``blobstate state dump --state-var NAME`` / ``--timers`` without Spark: a stateful processor's store, committed
the way the driver binding commits it (each batch's changelog, as the processor runtime staged it, a delta record;
with a snapshot in between and older deltas pruned, so the variables' metadata is found either in a changelog or in
the restored snapshot), read back decoded in the shapes of Spark's state data source."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from blobstate.model.records import StoreKey
from blobstate.spark.processor import ProcessorSpec
from tests.processors import inputs, top_n
from tests.support.processor_store import commit_batches


def cli(*args: str) -> SimpleNamespace:
    from click.testing import CliRunner

    from blobstate.cli import main

    result = CliRunner().invoke(main, [str(a) for a in args])
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)


@pytest.fixture(params=["deltas", "snapshot"])
def processor_store(tmp_path, request):
    """Four batches of the top-N processor (a ListState) committed as deltas; with ``snapshot``, a snapshot of
    batch 1 and the deltas before it pruned (retain 1). Returns the repository URL and the rows of ``top`` after
    each batch, as the runtime's own reader gives them."""
    return commit_batches(tmp_path, top_n.TopN, ProcessorSpec(("k",), top_n.OUTPUT), inputs.top_n(4), "top",
                          key=StoreKey("j", "0", "scores"), snapshot_at=1 if request.param == "snapshot" else None)


def _lines(result: SimpleNamespace) -> list[dict]:
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_dump_state_var_prints_the_variable_as_spark_s_state_data_source_rows(processor_store):
    repo, expected = processor_store
    rows = _lines(cli("state", "dump", "--repo", repo, "--job", "j", "--store", "scores", "--state-var", "top"))
    assert rows == expected[3] and len(rows) > 10  # one row per list element, key and element as objects
    assert set(rows[0]) == {"key", "list_element", "partition_id"}
    at_2 = _lines(cli("state", "dump", "--repo", repo, "--job", "j", "--store", "scores", "--state-var", "top",
                      "--batch", "2"))
    assert at_2 == expected[2] != expected[3]


def test_an_unknown_state_var_is_exit_2_naming_the_variables_there_are(processor_store):
    repo, _ = processor_store
    result = cli("state", "dump", "--repo", repo, "--job", "j", "--store", "scores", "--state-var", "count")
    assert result.returncode == 2
    assert "no state variable 'count'" in result.stderr and "it has: top" in result.stderr
    assert result.stdout == ""


def test_timers_of_a_processor_without_timers_are_none_and_csv_is_refused(processor_store):
    repo, _ = processor_store
    assert _lines(cli("state", "dump", "--repo", repo, "--job", "j", "--store", "scores", "--timers")) == []
    refused = cli("state", "dump", "--repo", repo, "--job", "j", "--store", "scores", "--state-var", "top",
                  "--format", "csv")
    assert refused.returncode == 2 and "JSON lines" in refused.stderr
