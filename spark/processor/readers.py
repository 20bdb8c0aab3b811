"""A processor's state as data, in the shapes of Spark's state data source for ``transformWithState``: one state
variable (``stateVarName``), the registered timers (``readRegisteredTimers``), one variable's changes in a batch's
changelog (``readChangeFeed``). Each is a ``pyarrow.Table`` with Spark's column names; the caller adds
``partition_id`` (and ``batch_id`` for changes) and turns partitions into a DataFrame.

* value state: ``key`` (struct of the grouping key), ``value`` (struct of the value schema);
* list state: ``key``, ``list_element`` (struct): one row per element (Spark's flattened form);
* map state: ``key``, ``user_map_key`` (struct), ``user_map_value`` (struct): one row per user key;
* timers: ``key``, ``expiration_timestamp_ms`` (int64);
* changes: ``change_type`` (``"update"``/``"delete"``), ``key``, then the variable's columns (a list's
  ``list_value`` holds the whole new list: a list is one record), null for a delete.

A variable with a TTL shows each value as Spark stores it, ``{"value": {...}, "ttlExpirationMs": expiry}``.
``as_of_ms`` hides values whose TTL expiry is at or before it (a committed state holds no value expired at its own
batch's processing time: the sweep removed them).
"""

from __future__ import annotations

from typing import Any

from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor import codec
from blobstate.spark.processor import metadata as meta_doc
from blobstate.spark.processor.codec import KeyCodec, ValueCodec
from blobstate.spark.processor.metadata import Metadata, Variable
from blobstate.spark.processor.schema import Schema
from blobstate.spark.processor.store import MAP, VALUES, Store, space
from blobstate.spark.processor.timers import MODES, Timers
from blobstate.spark.processor.ttl import expired

_NEVER = -(1 << 63)


def _struct(schema: Schema) -> Any:
    import pyarrow as pa

    return pa.struct([pa.field(f.name, t.type, f.nullable) for f, t in zip(schema.fields, schema.arrow(),
                                                                             strict=True)])


def _dict(schema: Schema, values: tuple) -> dict[str, Any]:
    return dict(zip(schema.names, values, strict=True))


class _Values:
    """A variable's values as the state data source shows them: a struct of the schema, wrapped with its expiry
    (``{"value": ..., "ttlExpirationMs": ...}``) when the variable has a TTL, as Spark stores TTL values."""

    def __init__(self, info: Variable, name: str) -> None:
        self.codec = ValueCodec(info.schemas, what=f"state variable {name!r}")
        self.ttl = info.ttl_ms is not None

    def type(self) -> Any:
        import pyarrow as pa

        inner = _struct(self.codec.schema)
        return pa.struct([("value", inner), ("ttlExpirationMs", pa.int64())]) if self.ttl else inner

    def row(self, arr: list[Any]) -> dict[str, Any]:
        value = _dict(self.codec.schema, self.codec.read(arr))
        return {"value": value, "ttlExpirationMs": arr[1]} if self.ttl else value


class StateReader:
    """Reads one partition's processor state from ``db`` (an open ``Rdict``, or a batch's ``StagedWrites``);
    ``metadata``: the store's metadata document when known (then ``db`` may be None: ``changes`` reads no state)."""

    def __init__(self, db: Any, metadata: Metadata | None = None) -> None:
        self.store = Store(db)
        self.metadata: Metadata = meta_doc.load(self.store) if metadata is None else metadata
        if self.metadata.key_schema is None:
            self.key_codec = None
        else:
            self.key_codec = KeyCodec(self.metadata.key_schema, what="grouping key")

    def variable(self, name: str) -> Variable:
        info = self.metadata.variables.get(name)
        if info is None:
            known = ", ".join(sorted(self.metadata.variables)) or "none"
            raise StateVariableError(f"no state variable {name!r} in this store (it has: {known})")
        return info

    def _key(self, data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        assert self.key_codec is not None and self.metadata.key_schema is not None
        values, end = self.key_codec.decode(data, pos)
        return _dict(self.metadata.key_schema, values), end

    def read_variable(self, state_var: str, *, as_of_ms: int | None = None) -> Any:
        """The variable's content as a table (see the module docstring for the columns)."""
        import pyarrow as pa

        info = self.variable(state_var)
        values = _Values(info, state_var)
        now = _NEVER if as_of_ms is None else as_of_ms
        rows: list[dict[str, Any]] = []
        if info.kind in ("value", "list"):
            prefix = space(VALUES, info.vid)
            for key, raw in self.store.scan(prefix):
                gkey, _ = self._key(key, len(prefix))
                arr = codec.decode(raw)
                if info.kind == "value":
                    if not expired(arr[1], now):
                        rows.append({"key": gkey, "value": values.row(arr)})
                else:
                    rows += [{"key": gkey, "list_element": values.row(e)} for e in arr if not expired(e[1], now)]
        else:
            assert info.user_key is not None
            user = KeyCodec(info.user_key, what=f"state variable {state_var!r} user key")
            prefix = space(MAP, info.vid)
            for key, raw in self.store.scan(prefix):
                gkey, end = self._key(key, len(prefix))
                arr = codec.decode(raw)
                if not expired(arr[1], now):
                    rows.append({"key": gkey, "user_map_key": _dict(info.user_key, user.decode(key, end)[0]),
                                 "user_map_value": values.row(arr)})
        return pa.Table.from_pylist(rows, schema=self.variable_schema(state_var))

    def variable_schema(self, state_var: str) -> Any:
        """The ``pyarrow.Schema`` of ``read_variable(state_var)``: ``key``, then ``value`` (value state),
        ``list_element`` (list state) or ``user_map_key``, ``user_map_value`` (map state)."""
        import pyarrow as pa

        info = self.variable(state_var)
        key_type = _struct(self.metadata.key_schema or Schema(()))
        value_type = _Values(info, state_var).type()
        if info.kind == "map":
            assert info.user_key is not None
            return pa.schema([("key", key_type), ("user_map_key", _struct(info.user_key)),
                              ("user_map_value", value_type)])
        return pa.schema([("key", key_type), ("value" if info.kind == "value" else "list_element", value_type)])

    def timers_schema(self) -> Any:
        """The ``pyarrow.Schema`` of ``read_timers``: ``key``, ``expiration_timestamp_ms``."""
        import pyarrow as pa

        return pa.schema([("key", _struct(self.metadata.key_schema or Schema(()))),
                          ("expiration_timestamp_ms", pa.int64())])

    def read_timers(self) -> Any:
        """Every registered timer: ``key``, ``expiration_timestamp_ms``, in time order."""
        import pyarrow as pa

        rows: list[dict[str, Any]] = []
        mode = self.metadata.time_mode
        if mode in MODES:
            for ts, gkey in Timers(self.store, mode).all():
                rows.append({"key": self._key(gkey, 0)[0], "expiration_timestamp_ms": ts})
        return pa.Table.from_pylist(rows, schema=self.timers_schema())

    def changes(self, ops: list[tuple[bytes, Any, Any]], state_var: str) -> Any:
        """The changes to ``state_var`` among a batch's changelog ``ops`` (``StagedWrites.ops()`` or a decoded
        changelog), in op order. Read with the metadata as it is now: run it on the state after the batch."""
        import pyarrow as pa

        info = self.variable(state_var)
        values = _Values(info, state_var)
        kind_space = space(MAP if info.kind == "map" else VALUES, info.vid)
        user = None if info.user_key is None else KeyCodec(info.user_key, what=f"{state_var!r} user key")
        rows: list[dict[str, Any]] = []
        for op, key, raw in ops:
            if not isinstance(key, bytes) or not key.startswith(kind_space):
                continue
            gkey, end = self._key(key, len(kind_space))
            row: dict[str, Any] = {"change_type": "delete" if op == b"D" else "update", "key": gkey}
            arr = None if raw is None else codec.decode(raw)
            if info.kind == "value":
                row["value"] = None if arr is None else values.row(arr)
            elif info.kind == "list":
                row["list_value"] = None if arr is None else [values.row(e) for e in arr]
            else:
                assert user is not None and info.user_key is not None
                row["user_map_key"] = _dict(info.user_key, user.decode(key, end)[0])
                row["user_map_value"] = None if arr is None else values.row(arr)
            rows.append(row)
        return pa.Table.from_pylist(rows, schema=self.changes_schema(state_var))

    def changes_schema(self, state_var: str) -> Any:
        """The ``pyarrow.Schema`` of ``changes(..., state_var)``: ``change_type``, ``key``, then ``value`` (value
        state), ``list_value`` (list state: the whole new list) or ``user_map_key``, ``user_map_value``."""
        import pyarrow as pa

        info = self.variable(state_var)
        value_type = _Values(info, state_var).type()
        fields = [("change_type", pa.string()), ("key", _struct(self.metadata.key_schema or Schema(())))]
        if info.kind == "value":
            fields.append(("value", value_type))
        elif info.kind == "list":
            fields.append(("list_value", pa.list_(value_type)))
        else:
            assert info.user_key is not None
            fields += [("user_map_key", _struct(info.user_key)), ("user_map_value", value_type)]
        return pa.schema(fields)
