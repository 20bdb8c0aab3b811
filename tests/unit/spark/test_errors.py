"""``blobstate.spark.errors``: every error of the package in one module, each a subclass of a core error with that
error's exit code (the CLI's ``blobstate spark`` commands exit with it), and the public ones still importable from
``blobstate.spark``; the processor runtime's usage errors name what is wrong."""

import pytest

import blobstate.spark
from blobstate.errors import (
    EXIT_ERROR,
    EXIT_NOTHING_TO_RESTORE,
    EXIT_USAGE,
    ConfigurationError,
    NothingToRestore,
    PartitionCountError,
)
from blobstate.spark import errors
from blobstate.spark.errors import (
    DestinationNotEmpty,
    HelperUnavailable,
    PartitioningError,
    RescaleAlreadyCommitted,
    RescaleRefused,
    SnapshotCommitError,
    SparkAlignmentError,
    StateAlreadyWritten,
    StateSchemaError,
    StateVariableError,
    StateWriteRefused,
    UnmappableKeyError,
    UnwritableRows,
)


@pytest.mark.parametrize(("error", "base", "exit_code"), [
    (SparkAlignmentError, NothingToRestore, EXIT_NOTHING_TO_RESTORE),
    (PartitioningError, PartitionCountError, EXIT_USAGE),
    (StateWriteRefused, ConfigurationError, EXIT_USAGE),
    (DestinationNotEmpty, StateWriteRefused, EXIT_USAGE),
    (RescaleRefused, ConfigurationError, EXIT_USAGE),
    (UnmappableKeyError, RescaleRefused, EXIT_USAGE),
    (RescaleAlreadyCommitted, RescaleRefused, EXIT_USAGE),
    (StateVariableError, ConfigurationError, EXIT_USAGE),
])
def test_each_error_is_a_core_error_with_its_exit_code(error, base, exit_code):
    assert issubclass(error, base) and error.exit_code == exit_code
    assert error.__module__ == "blobstate.spark.errors"


def test_the_errors_that_carry_data_keep_it():
    record = object()
    assert StateAlreadyWritten("done", checkpoint=record).checkpoint is record  # type: ignore[arg-type]
    rows = UnwritableRows("bad rows", problems=["key 'a' arrives twice"], duplicates=True)
    assert (rows.problems, rows.duplicates, rows.exit_code) == (["key 'a' arrives twice"], True, EXIT_USAGE)
    assert SnapshotCommitError("failed", batch_id=3, cause=StateWriteRefused("x")).exit_code == EXIT_USAGE
    failed = SnapshotCommitError("failed", batch_id=None, cause=OSError("disk"))
    assert failed.batch_id is None and failed.exit_code == EXIT_ERROR  # the cause's, else a storage error's
    assert issubclass(HelperUnavailable, RuntimeError)  # placement's own: caught, placement skipped


def test_the_public_errors_are_still_importable_from_blobstate_spark():
    public = {name for name in blobstate.spark.__all__ if isinstance(getattr(blobstate.spark, name), type)
              and issubclass(getattr(blobstate.spark, name), BaseException)}
    assert public == {"DestinationNotEmpty", "PartitioningError", "RescaleAlreadyCommitted", "RescaleRefused",
                      "SnapshotCommitError", "SparkAlignmentError", "StateAlreadyWritten", "StateWriteRefused",
                      "UnmappableKeyError", "UnwritableRows"}
    assert all(getattr(blobstate.spark, name) is getattr(errors, name) for name in public)


def test_the_schema_error_names_the_variable_and_both_schemas():
    err = StateSchemaError("seen", "value", "n bigint", "n int", "field 'n' changed type")
    assert isinstance(err, ConfigurationError) and err.exit_code == EXIT_USAGE
    assert (err.variable, err.recorded, err.declared) == ("seen", "n bigint", "n int")
    assert all(part in str(err) for part in ("'seen'", "n bigint", "n int", "changed type", "deleteIfExists"))
