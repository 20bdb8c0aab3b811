"""The store's record of its state variables: each variable's number, kind, schemas (every version it was written
under), map user key schema and TTL, the grouping key's schema and the time mode; kept in the store itself (one
JSON document under ``store.META_KEY``), so it is committed, snapshotted and restored with the state it describes.

``reconcile`` compares what a processor's ``init`` declared in this batch with the record: a compatible change (a
nullable field added, a new variable, another TTL) gives the new record; an incompatible one raises
``StateSchemaError`` before the batch writes anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from blobstate.spark.errors import StateSchemaError, StateVariableError
from blobstate.spark.processor.schema import Schema, check_evolution
from blobstate.spark.processor.store import META_KEY, Store

FORMAT = 1
KINDS = ("value", "list", "map")


@dataclass
class Variable:
    """A recorded state variable: ``vid`` (its key spaces' number), ``kind`` (``value``, ``list``, ``map``),
    ``schemas`` (value schemas, oldest first: a value is read from the version it was written under),
    ``user_key`` (a map's user key schema), ``ttl_ms`` (None: no TTL)."""

    name: str
    vid: int
    kind: str
    schemas: list[Schema]
    user_key: Schema | None = None
    ttl_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"vid": self.vid, "kind": self.kind, "schemas": [s.to_json() for s in self.schemas],
                "user_key": None if self.user_key is None else self.user_key.to_json(), "ttl_ms": self.ttl_ms}

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> Variable:
        user_key = data.get("user_key")
        return cls(name, int(data["vid"]), str(data["kind"]), [Schema.from_json(s) for s in data["schemas"]],
                   None if user_key is None else Schema.from_json(user_key), data.get("ttl_ms"))


@dataclass(frozen=True)
class Declared:
    """A variable as ``init`` declared it in this batch."""

    name: str
    kind: str
    schema: Schema
    user_key: Schema | None = None
    ttl_ms: int | None = None


@dataclass
class Metadata:
    """The document: ``time_mode`` (Spark's spelling), ``key_schema`` (the grouping key), ``variables`` by name,
    ``next_vid`` (numbers are never reused)."""

    time_mode: str | None = None
    key_schema: Schema | None = None
    variables: dict[str, Variable] = field(default_factory=dict)
    next_vid: int = 1

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "time_mode": self.time_mode,
                           "key_schema": None if self.key_schema is None else self.key_schema.to_json(),
                           "next_vid": self.next_vid,
                           "variables": {n: v.to_json() for n, v in sorted(self.variables.items())}},
                          sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Metadata:
        data = json.loads(text)
        if data.get("format") != FORMAT:
            raise StateSchemaError("<store>", "metadata format", str(data.get("format")), str(FORMAT))
        key = data.get("key_schema")
        return cls(data.get("time_mode"), None if key is None else Schema.from_json(key),
                   {n: Variable.from_json(n, v) for n, v in data.get("variables", {}).items()},
                   int(data.get("next_vid", 1)))


def load(store: Store) -> Metadata:
    """The store's metadata document (an empty one for a new store)."""
    raw = store.get(META_KEY)
    return Metadata() if raw is None else Metadata.from_json(raw.decode() if isinstance(raw, bytes) else raw)


def save(store: Store, before: Metadata, after: Metadata) -> None:
    """Stage ``after`` when it differs from ``before`` (an unchanged record writes nothing)."""
    text = after.to_json()
    if text != before.to_json():
        store.put(META_KEY, text.encode())


def reconcile(meta: Metadata, declared: list[Declared], deleted: list[str], *, time_mode: str,
              key_schema: Schema | None) -> tuple[Metadata, list[Variable]]:
    """``(new metadata, variables to purge)`` for this batch's ``init``: ``deleted`` (``deleteIfExists``) names
    leave the record and their records are to be purged; ``declared`` variables are checked against the record
    (kind, user key, value schema evolution) or added. Raises ``StateSchemaError`` on any incompatibility,
    ``StateVariableError`` past 65,535 variables."""
    new = Metadata(meta.time_mode, meta.key_schema, dict(meta.variables), meta.next_vid)
    if new.time_mode is not None and new.time_mode != time_mode:
        raise StateSchemaError("<time mode>", "time mode", new.time_mode, time_mode)
    new.time_mode = time_mode
    if key_schema is not None:
        if new.key_schema is not None and new.key_schema != key_schema:
            raise StateSchemaError("<grouping key>", "grouping key", new.key_schema.ddl(), key_schema.ddl())
        new.key_schema = key_schema
    purge = [new.variables.pop(name) for name in deleted if name in new.variables]
    for d in declared:
        old = new.variables.get(d.name)
        if old is None:
            if new.next_vid > 0xFFFF:
                raise StateVariableError("a store holds at most 65,535 state variables over its life")
            new.variables[d.name] = Variable(d.name, new.next_vid, d.kind, [d.schema], d.user_key, d.ttl_ms)
            new.next_vid += 1
            continue
        if old.kind != d.kind:
            raise StateSchemaError(d.name, "kind", f"{old.kind} state", f"{d.kind} state")
        if old.user_key != d.user_key:
            raise StateSchemaError(d.name, "user key", _ddl(old.user_key), _ddl(d.user_key),
                                   "a map's user keys are its stored keys: they cannot change")
        schemas = list(old.schemas)
        if schemas[-1] != d.schema:
            check_evolution(d.name, "value", schemas[-1], d.schema)
            schemas.append(d.schema)
        new.variables[d.name] = Variable(d.name, old.vid, d.kind, schemas, d.user_key, d.ttl_ms)
    return new, purge


def _ddl(schema: Schema | None) -> str:
    return "none" if schema is None else schema.ddl()
