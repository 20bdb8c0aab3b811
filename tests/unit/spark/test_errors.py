"""The runtime's typed errors: usage errors (exit 2) that name what is wrong."""

from blobstate.errors import EXIT_USAGE, ConfigurationError
from blobstate.spark.errors import StateSchemaError, StateVariableError


def test_both_are_usage_errors_and_the_schema_error_names_the_variable_and_both_schemas():
    err = StateSchemaError("seen", "value", "n bigint", "n int", "field 'n' changed type")
    assert isinstance(err, ConfigurationError) and err.exit_code == EXIT_USAGE
    assert (err.variable, err.recorded, err.declared) == ("seen", "n bigint", "n int")
    assert all(part in str(err) for part in ("'seen'", "n bigint", "n int", "changed type", "deleteIfExists"))
    assert StateVariableError("x").exit_code == EXIT_USAGE
