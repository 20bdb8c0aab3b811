"""The SQL checkpoint log on SQLAlchemy: ``sqlite:///PATH`` (embedded default) and ``postgresql://...``.

One table (``blobstate_checkpoints`` unless the ``table`` option says otherwise), created on first use, with
the primary key ``(job, task, store, generation)``: of two writers inserting the same generation the database
itself refuses the second (``IntegrityError`` -> ``FencedError``). ``append`` runs in one transaction: read the
highest generation, refuse a stale ``expected_generation``, insert ``expected + 1``, and refuse (roll back) when a
newer generation already exists (a zombie that slipped into a generation pruned away). On SQLite the transaction
starts with ``BEGIN IMMEDIATE``, so it holds the write lock from its first read. ``record`` holds
``Checkpoint.to_bytes()`` (UTF-8 JSON); a row that does not parse, or names another key or generation than its
columns, raises ``CorruptIndexError``. ``prune`` deletes all but the newest ``keep`` rows.

``postgresql://`` URLs use psycopg 3 (``postgresql+psycopg://``); an explicit ``postgresql+DRIVER://`` is kept.
Options (``storage_options``): ``table`` (name) and ``engine_options`` (passed to ``sqlalchemy.create_engine``).
Every database failure is a ``StorageError`` whose text never contains the password; ``url`` hides it too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy  # noqa: F401 - this backend's dependency: a missing extra fails at resolution (blobstate.plugin.records)

from blobstate.errors import (
    AppendOutcomeUnknown,
    ConfigurationError,
    CorruptIndexError,
    FencedError,
    StorageError,
)
from blobstate.model.records import MAX_RECORD_BYTES, Checkpoint, StoreKey
from blobstate.plugin.interfaces import CheckpointLog

DEFAULT_TABLE = "blobstate_checkpoints"


def engine_url(url: str) -> str:
    """The SQLAlchemy URL for a checkpoint-log URL: ``postgresql://`` gets the psycopg (3) driver."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ConfigurationError(f"not a database URL: {url.split('@')[-1]!r}")
    if scheme.lower() in ("postgresql", "postgres"):
        return f"postgresql+psycopg://{rest}"
    return url


def make_table(name: str) -> Any:
    """The checkpoint table: primary key (job, task, store, generation); ``record`` the checkpoint JSON."""
    from sqlalchemy import BigInteger, Column, MetaData, String, Table, Text

    return Table(
        name, MetaData(),
        Column("job", String(200), primary_key=True),
        Column("task", String(200), primary_key=True),
        Column("store", String(200), primary_key=True),
        Column("generation", BigInteger, primary_key=True, autoincrement=False),
        Column("checkpoint_id", String(200), nullable=False),
        Column("created_time_ms", BigInteger, nullable=False),
        Column("record", Text, nullable=False),
    )


class SqlCheckpointLog(CheckpointLog):
    """``CheckpointLog`` in a SQL table; fencing by the primary key and a check inside one transaction.

    Raises ``FencedError`` (lost race, stale writer), ``CorruptIndexError`` (malformed row) and ``StorageError``
    (database unreachable or failing; the message never contains the password).
    """

    def __init__(self, url: str, *, table: str = DEFAULT_TABLE, engine_options: dict[str, Any] | None = None) -> None:
        from sqlalchemy import create_engine, event
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            sa_url = make_url(engine_url(url))
        except ArgumentError as exc:
            raise ConfigurationError(f"bad database URL: {exc}") from None
        self._password = sa_url.password
        self.url = sa_url.render_as_string(hide_password=True)
        self._sqlite = sa_url.get_backend_name() == "sqlite"
        options: dict[str, Any] = {"pool_pre_ping": not self._sqlite, **(engine_options or {})}
        if self._sqlite:
            options.setdefault("connect_args", {"timeout": 30})
        self.engine = create_engine(sa_url, **options)  # a missing driver's ImportError: see blobstate.plugin.records
        if self._sqlite:
            # pysqlite opens transactions lazily (after reads); take the write lock at BEGIN instead.
            @event.listens_for(self.engine, "connect")
            def _no_implicit_begin(dbapi_conn: Any, _record: Any) -> None:
                dbapi_conn.isolation_level = None

            @event.listens_for(self.engine, "begin")
            def _begin_immediate(conn: Any) -> None:
                conn.exec_driver_sql("BEGIN IMMEDIATE")

        self.table = make_table(table)
        self._schema_ready = False
        self._schema_lock = threading.Lock()

    # -- plumbing --------------------------------------------------------------------------------------------
    @contextmanager
    def _db_errors(self, what: str) -> Iterator[None]:
        from sqlalchemy.exc import SQLAlchemyError

        try:
            yield
        except SQLAlchemyError as exc:
            text = f"{type(exc.orig if getattr(exc, 'orig', None) is not None else exc).__name__}: "
            text += str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            if self._password:
                text = text.replace(self._password, "***")
            raise StorageError(f"{what} on {self.url} failed: {text}") from None

    def _ensure_schema(self) -> None:
        """Create the table on first use (concurrent creators are fine: the loser finds it made)."""
        if self._schema_ready:
            return
        from sqlalchemy.exc import DBAPIError

        with self._schema_lock, self._db_errors("creating the checkpoint table"):
            if self._schema_ready:
                return
            try:
                self.table.create(self.engine, checkfirst=True)
            except DBAPIError:
                self.table.create(self.engine, checkfirst=True)  # another process created it in between
            self._schema_ready = True

    def _where(self, key: StoreKey) -> Any:
        t = self.table.c
        return (t.job == key.job) & (t.task == key.task) & (t.store == key.store)

    def _record(self) -> Any:
        """The ``record`` column cut by the database to one character more than any checkpoint record has: an
        oversized row is refused by ``Checkpoint.from_bytes`` (exit 3) without ever being fetched whole."""
        from sqlalchemy import func

        return func.substr(self.table.c.record, 1, MAX_RECORD_BYTES + 1).label("record")

    def _parse(self, key: StoreKey, row: Any) -> Checkpoint:
        source = f"{self.table.name} row {key}/{row.generation}"
        cp = Checkpoint.from_bytes(row.record.encode(), source=source)
        if cp.store_key != key or cp.generation != row.generation:
            raise CorruptIndexError(f"corrupt checkpoint record {source}: holds generation {cp.generation} of "
                                    f"{cp.store_key}")
        return cp

    def _rows(self, conn: Any, key: StoreKey, *, newest_first: bool = False, limit: int | None = None) -> list:
        from sqlalchemy import select

        gen = self.table.c.generation
        query = select(self.table.c.generation, self._record()).where(self._where(key))
        query = query.order_by(gen.desc() if newest_first else gen.asc())
        if limit is not None:
            query = query.limit(limit)
        return list(conn.execute(query))

    # -- the contract ------------------------------------------------------------------------------------------
    def latest(self, key: StoreKey) -> Checkpoint | None:
        self._ensure_schema()
        with self._db_errors(f"reading the latest checkpoint of {key}"), self.engine.connect() as conn:
            rows = self._rows(conn, key, newest_first=True, limit=1)
        return self._parse(key, rows[0]) if rows else None

    def history(self, key: StoreKey) -> list[Checkpoint]:
        self._ensure_schema()
        with self._db_errors(f"reading the history of {key}"), self.engine.connect() as conn:
            rows = self._rows(conn, key)
        return [self._parse(key, row) for row in rows]

    def append(self, checkpoint: Checkpoint, expected_generation: int) -> Checkpoint:
        from sqlalchemy import func, insert, select
        from sqlalchemy.exc import IntegrityError

        key = checkpoint.store_key
        record = checkpoint.with_generation(expected_generation + 1)
        self._ensure_schema()
        gen = self.table.c.generation
        try:
            with self._db_errors(f"appending generation {record.generation} of {key}"), \
                    self.engine.begin() as conn:
                current = conn.execute(select(func.max(gen)).where(self._where(key))).scalar() or 0
                if current > expected_generation and (ours := self._ours(conn, key, record)) is not None:
                    return ours  # a re-append resolving an unknown outcome: it landed
                if current != expected_generation:
                    raise FencedError(f"fenced: {key} is at generation {current}, this writer expected "
                                      f"{expected_generation}", expected=expected_generation, actual=current)
                conn.execute(insert(self.table).values(
                    job=key.job, task=key.task, store=key.store, generation=record.generation,
                    checkpoint_id=record.checkpoint_id, created_time_ms=record.created_time_ms,
                    record=record.to_bytes().decode()))
                newer = conn.execute(select(func.max(gen)).where(self._where(key))).scalar() or 0
                if newer > record.generation:  # raising rolls the insert back
                    raise FencedError(f"fenced: {key} already has generation {newer}", expected=expected_generation,
                                      actual=newer)
        except StorageError as exc:
            if isinstance(exc.__context__, IntegrityError):
                with self._db_errors(f"reading generation {record.generation} of {key}"), \
                        self.engine.connect() as conn:
                    ours = self._ours(conn, key, record)
                if ours is not None:
                    return ours  # our own insert, retried after a lost answer
                raise FencedError(f"fenced: another writer inserted generation {record.generation} of {key} first",
                                  expected=expected_generation, actual=record.generation) from None
            # The connection failed with the transaction under way: its COMMIT may have been applied.
            raise AppendOutcomeUnknown(f"append of generation {record.generation} of {key}: outcome unknown "
                                       f"({exc})", checkpoint_id=record.checkpoint_id) from exc
        return record

    def _ours(self, conn: Any, key: StoreKey, record: Checkpoint) -> Checkpoint | None:
        """The row at ``record``'s generation when it holds the same checkpoint (an earlier attempt landed)."""
        from sqlalchemy import select

        row = conn.execute(select(self.table.c.generation, self._record()).where(self._where(key))
                           .where(self.table.c.generation == record.generation)).first()
        if row is None:
            return None
        existing = self._parse(key, row)
        return existing if existing.checkpoint_id == record.checkpoint_id else None

    def prune(self, key: StoreKey, keep: int, *, below: int | None = None) -> list[Checkpoint]:
        from sqlalchemy import delete

        keep = max(1, keep)
        self._ensure_schema()
        with self._db_errors(f"pruning {key}"), self.engine.begin() as conn:
            rows = [row for row in self._rows(conn, key, newest_first=True)[keep:]
                    if below is None or row.generation < below]
            removed = [self._parse(key, row) for row in rows]
            if rows:
                conn.execute(delete(self.table).where(self._where(key))
                             .where(self.table.c.generation.in_([row.generation for row in rows])))
        return sorted(removed, key=lambda cp: cp.generation)

    def forget(self, key: StoreKey, records: Sequence[Checkpoint]) -> list[Checkpoint]:
        from sqlalchemy import delete

        wanted = {r.generation: r.checkpoint_id for r in records}
        self._ensure_schema()
        with self._db_errors(f"forgetting records of {key}"), self.engine.begin() as conn:
            rows = self._rows(conn, key, newest_first=True)
            if rows and any(g >= rows[0].generation for g in wanted):
                raise ValueError(f"refusing to forget generation {max(wanted)} of {key}: the newest record")
            held = [self._parse(key, row) for row in rows if row.generation in wanted]
            gone = [cp for cp in held if cp.checkpoint_id == wanted[cp.generation]]
            if gone:
                conn.execute(delete(self.table).where(self._where(key))
                             .where(self.table.c.generation.in_([cp.generation for cp in gone])))
        return sorted(gone, key=lambda cp: cp.generation)

    def keys(self) -> list[StoreKey]:
        from sqlalchemy import select

        self._ensure_schema()
        t = self.table.c
        with self._db_errors("listing store keys"), self.engine.connect() as conn:
            rows = list(conn.execute(select(t.job, t.task, t.store).distinct()))
        return sorted(StoreKey(r.job, r.task, r.store) for r in rows)

    def close(self) -> None:
        self.engine.dispose()


def open_sql_log(url: str, *, storage_options: dict[str, Any] | None = None) -> SqlCheckpointLog:
    """Open the SQL checkpoint log at ``url`` (``sqlite:///PATH``, ``postgresql://user:pw@host:port/db``).

    Nothing is contacted until the first call. Raises ``MissingDependencyError`` without SQLAlchemy or the
    database driver, ``ConfigurationError`` for a bad URL or option.
    """
    opts = dict(storage_options or {})
    table = str(opts.pop("table", DEFAULT_TABLE))
    engine_options = dict(opts.pop("engine_options", None) or {})
    if opts:
        raise ConfigurationError(f"unknown SQL checkpoint log options: {', '.join(sorted(opts))} "
                                 "(known: table, engine_options)")
    if not table.replace("_", "").isalnum():
        raise ConfigurationError(f"bad SQL checkpoint table name {table!r}: letters, digits and '_' only")
    return SqlCheckpointLog(url, table=table, engine_options=engine_options)
