"""State and output schemas without a JVM: Spark's DDL strings (``"n long, name string"``) and ``StructType``s read
into one small Spark-agnostic form, their Arrow types, Python value checks, and the compatibility rule of a restart.

pyspark parses a DDL string only through a running JVM (``_parse_datatype_string`` needs a SparkContext), so a
processor run outside Spark could not even name its state. This module reads the DDL subset state variables use:
``name type [NOT NULL] [COMMENT '...']`` fields, comma separated, of Spark's atomic types (``string``,
``bigint``/``long``, ``int``/``integer``, ``smallint``/``short``, ``tinyint``/``byte``, ``double``, ``float``/
``real``, ``boolean``, ``binary``, ``timestamp``, ``timestamp_ntz``, ``date``, ``decimal(p,s)``). Nested types
(struct, array, map) are refused with a ``StateVariableError`` naming them.

Compatibility (``check_evolution``), checked on every restart before anything is written: the same fields continue;
fields added as nullable continue (old values read them as None); a field removed, renamed, retyped or made
non-nullable is refused (``StateSchemaError``, exit 2, naming the variable and both schemas).
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from blobstate.spark.errors import StateSchemaError, StateVariableError

#: DDL spellings -> Spark's canonical type name (``DataType.simpleString``)
_ALIASES = {
    "string": "string", "varchar": "string", "char": "string",
    "bigint": "bigint", "long": "bigint", "int": "int", "integer": "int", "smallint": "smallint",
    "short": "smallint", "tinyint": "tinyint", "byte": "tinyint", "double": "double", "float": "float",
    "real": "float", "boolean": "boolean", "bool": "boolean", "binary": "binary", "timestamp": "timestamp",
    "timestamp_ltz": "timestamp", "timestamp_ntz": "timestamp_ntz", "date": "date", "decimal": "decimal",
    "dec": "decimal", "numeric": "decimal",
}
_INT_BITS = {"bigint": 64, "int": 32, "smallint": 16, "tinyint": 8}
_FIELD = re.compile(
    r"""\s*(?P<name>`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)\s*:?\s*
        (?P<type>[A-Za-z_]+)\s*(?:\(\s*(?P<args>[0-9,\s]+)\)\s*)?
        (?P<notnull>NOT\s+NULL)?\s*(?:COMMENT\s+'(?:[^'\\]|\\.)*')?\s*$""",
    re.IGNORECASE | re.VERBOSE)


@dataclass(frozen=True)
class Field:
    """One column: ``name``, Spark's canonical ``type`` name (``"bigint"``, ``"decimal(10,2)"``), ``nullable``."""

    name: str
    type: str
    nullable: bool = True


@dataclass(frozen=True)
class Schema:
    """An ordered tuple of ``Field``s (a Spark ``StructType`` of atomic types)."""

    fields: tuple[Field, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def ddl(self) -> str:
        """Spark's DDL for this schema, e.g. ``"n bigint, name string NOT NULL"``."""
        return ", ".join(f"{_quoted(f.name)} {f.type}{'' if f.nullable else ' NOT NULL'}" for f in self.fields)

    def to_json(self) -> list[list[Any]]:
        return [[f.name, f.type, f.nullable] for f in self.fields]

    @classmethod
    def from_json(cls, data: list[list[Any]]) -> Schema:
        return cls(tuple(Field(str(n), str(t), bool(nl)) for n, t, nl in data))

    def arrow(self) -> Any:
        """The ``pyarrow.Schema`` of this schema (``bigint`` -> int64, ``timestamp`` -> timestamp[us, UTC], ...)."""
        import pyarrow as pa

        return pa.schema([pa.field(f.name, arrow_type(f.type), f.nullable) for f in self.fields])

    def __str__(self) -> str:
        return self.ddl()


def _quoted(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else "`" + name.replace("`", "``") + "`"


def parse(schema: Any, *, what: str = "schema") -> Schema:
    """A ``Schema`` from a DDL string, a pyspark ``StructType`` or a ``Schema``; ``StateVariableError`` naming
    ``what`` when it cannot be read or holds a type this runtime does not store."""
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, str):
        return _parse_ddl(schema, what)
    fields = getattr(schema, "fields", None)
    if fields is None:
        raise StateVariableError(f"{what}: expected a DDL string or a StructType, not {type(schema).__name__}")
    out = []
    for f in fields:
        out.append(Field(f.name, _canonical(f.dataType.simpleString(), what), bool(f.nullable)))
    return Schema(tuple(out))


def _parse_ddl(ddl: str, what: str) -> Schema:
    text = ddl.strip()
    if text.lower().startswith("struct<") and text.endswith(">"):
        text = text[len("struct<"):-1]
    parts = [p for p in _split_top(text) if p.strip()]
    if not parts:
        raise StateVariableError(f"{what}: empty schema {ddl!r}")
    fields = []
    for part in parts:
        m = _FIELD.match(part)
        if m is None:
            raise StateVariableError(f"{what}: cannot read {part.strip()!r} of {ddl!r} (a field is 'name type')")
        name = m["name"]
        if name.startswith("`"):
            name = name[1:-1].replace("``", "`")
        type_name = m["type"].lower() + (f"({m['args'].replace(' ', '')})" if m["args"] else "")
        fields.append(Field(name, _canonical(type_name, what), m["notnull"] is None))
    names = [f.name for f in fields]
    if len(set(names)) != len(names):
        raise StateVariableError(f"{what}: duplicate field names in {ddl!r}")
    return Schema(tuple(fields))


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses, angle brackets, quotes and backquotes."""
    parts, depth, start, quote = [], 0, 0, ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'`":
            quote = ch
        elif ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _canonical(type_name: str, what: str) -> str:
    base, _, args = type_name.lower().partition("(")
    canon = _ALIASES.get(base.strip())
    if canon is None:
        raise StateVariableError(f"{what}: type {type_name!r} is not stored by blobstate's processor runtime "
                                 "(atomic types only: string, bigint, int, smallint, tinyint, double, float, boolean, "
                                 "binary, timestamp, timestamp_ntz, date, decimal(p,s))")
    if canon != "decimal":
        return canon
    nums = [int(x) for x in args.rstrip(")").split(",") if x.strip()] if args else []
    precision, scale = (nums[0] if nums else 10), (nums[1] if len(nums) > 1 else 0)
    if not 0 < precision <= 38 or not 0 <= scale <= precision:
        raise StateVariableError(f"{what}: bad decimal precision/scale in {type_name!r}")
    return f"decimal({precision},{scale})"


def arrow_type(type_name: str) -> Any:
    """The Arrow type of a canonical Spark type name."""
    import pyarrow as pa

    simple = {"string": pa.string(), "bigint": pa.int64(), "int": pa.int32(), "smallint": pa.int16(),
              "tinyint": pa.int8(), "double": pa.float64(), "float": pa.float32(), "boolean": pa.bool_(),
              "binary": pa.binary(), "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
              "date": pa.date32()}
    if type_name in simple:
        return simple[type_name]
    p, s = (int(x) for x in type_name[len("decimal("):-1].split(","))
    return pa.decimal128(p, s)


def from_arrow_type(arrow: Any, *, what: str) -> str:
    """The canonical Spark type name of an Arrow type (a grouping key column's)."""
    import pyarrow as pa
    import pyarrow.types as t

    if t.is_dictionary(arrow):
        arrow = arrow.value_type
    checks: list[tuple[Callable[[Any], bool], str]] = [
        (t.is_string, "string"), (t.is_large_string, "string"), (lambda x: x == pa.int64(), "bigint"),
        (lambda x: x == pa.int32(), "int"), (lambda x: x == pa.int16(), "smallint"), (lambda x: x == pa.int8(),
        "tinyint"), (t.is_float64, "double"), (t.is_float32, "float"), (t.is_boolean, "boolean"),
        (t.is_binary, "binary"), (t.is_large_binary, "binary"), (t.is_date32, "date")]
    for check, name in checks:
        if check(arrow):
            return name
    if t.is_timestamp(arrow):
        return "timestamp" if arrow.tz else "timestamp_ntz"
    if t.is_decimal(arrow):
        return f"decimal({arrow.precision},{arrow.scale})"
    raise StateVariableError(f"{what}: a grouping key of Arrow type {arrow} is not supported (atomic types only)")


# -- Python values ---------------------------------------------------------------------------------------------------

def checker(field: Field, *, what: str) -> Callable[[Any], Any]:
    """A function that returns a value of ``field`` in its stored form (numpy scalars unboxed, ints widened to
    float for float fields) or raises ``StateVariableError`` naming ``what`` and the field."""
    kind = field.type.split("(")[0]

    def bad(value: Any) -> Any:
        raise StateVariableError(f"{what}: field {field.name!r} ({field.type}) cannot hold "
                                 f"{type(value).__name__} {value!r:.80}")

    def null(value: Any) -> Any:
        if not field.nullable:
            raise StateVariableError(f"{what}: field {field.name!r} is NOT NULL and got None")
        return None

    if kind in _INT_BITS:
        lo, hi = -(1 << (_INT_BITS[kind] - 1)), (1 << (_INT_BITS[kind] - 1)) - 1

        def check_int(v: Any) -> Any:
            if type(v) is int and lo <= v <= hi:
                return v
            if v is None:
                return null(v)
            v2 = unbox(v)
            return check_int(v2) if v2 is not v and type(v2) is int else bad(v)
        return check_int
    python_types: dict[str, tuple[type, ...]] = {
        "string": (str,), "double": (float, int), "float": (float, int), "boolean": (bool,),
        "binary": (bytes, bytearray, memoryview), "timestamp": (dt.datetime,), "timestamp_ntz": (dt.datetime,),
        "date": (dt.date,), "decimal": (decimal.Decimal, int)}
    accepted = python_types[kind]
    to_float = kind in ("double", "float")

    def check(v: Any) -> Any:
        if v is None:
            return null(v)
        if not isinstance(v, accepted) or (type(v) is bool and kind != "boolean"):
            v2 = unbox(v)
            if v2 is v or not isinstance(v2, accepted):
                return bad(v)
            v = v2
        if kind == "date" and isinstance(v, dt.datetime):
            return bad(v)
        if to_float:
            return float(v)
        if kind == "binary":
            return bytes(v)
        return v
    return check


def unbox(value: Any) -> Any:
    """numpy and pandas scalars as Python values (``np.int64`` -> int, ``pd.Timestamp`` -> datetime), as Spark's
    client normalises state values; anything else unchanged."""
    item = getattr(value, "item", None)
    if item is not None and type(value).__module__ == "numpy":
        return item()
    to_py = getattr(value, "to_pydatetime", None)
    if to_py is not None:
        return to_py()
    return value


def check_evolution(variable: str, role: str, old: Schema, new: Schema) -> None:
    """Raise ``StateSchemaError`` unless values written under ``old`` can be read under ``new``: every old field
    kept by name with its type and without becoming NOT NULL, every added field nullable."""
    if old == new:
        return
    old_by_name = {f.name: f for f in old.fields}
    new_names = {f.name for f in new.fields}
    problems = [f"field {f.name!r} removed" for f in old.fields if f.name not in new_names]
    for f in new.fields:
        before = old_by_name.get(f.name)
        if before is None:
            if not f.nullable:
                problems.append(f"field {f.name!r} added NOT NULL")
        elif before.type != f.type:
            problems.append(f"field {f.name!r} changed type {before.type} -> {f.type}")
        elif before.nullable and not f.nullable:
            problems.append(f"field {f.name!r} became NOT NULL")
    if problems:
        raise StateSchemaError(variable, role, old.ddl(), new.ddl(), "; ".join(problems))
