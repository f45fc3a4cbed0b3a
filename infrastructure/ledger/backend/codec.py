"""The stored form of a ledger row: the envelope zstd-compressed with a shared dictionary,
and the event id left out when the row's stream and sequence spell it (ADR 0058).

``event_json`` holds either the plain envelope (rows written before the
ledger had a dictionary, or by an earlier version) or one zstd frame made
with one of the ledger's dictionaries.  The two are told apart by their first
bytes: a zstd frame starts with :data:`MAGIC`, a JSON envelope with ``{``.
Every frame names its dictionary (the frame's dictionary id is the row of
the ``runtime_event_dictionaries`` table), so any reader on any host can
decompress it from the ledger alone.

A :class:`RowCodec` is plain data (the dictionaries' bytes) and pickles as
such, for the sync's worker processes; the zstd contexts are made on first
use, one per thread (they are not thread-safe).

As stored in the ledger itself: :func:`read_codec` builds the codec of an open
ledger from ``runtime_event_meta`` (``row_form``) and
``runtime_event_dictionaries``.  :func:`add_dictionary` stores a first (or
next) dictionary race-safely: two writers that train one at once (two ingest
followers on two hosts, one PostgreSQL) both insert under the same next id
with ``ON CONFLICT DO NOTHING``, then both read back and use the one that
landed.  :func:`read_plain` gives a page's plain envelopes, naming a row that
does not decompress.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import zstandard
from sqlalchemy import Connection, Engine, func, inspect, select

from pentrace.errors import LedgerError

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
    from pentrace.infrastructure.ledger.backend.schema import LedgerTables

__all__ = [
    "MAGIC",
    "ROW_FORM",
    "ROW_FORM_KEY",
    "CorruptRow",
    "RowCodec",
    "add_dictionary",
    "derived_event_id",
    "derived_session",
    "mark_new_form",
    "read_codec",
    "read_plain",
    "row_form",
    "store_dictionary",
    "stored_event_id",
    "train_dictionary",
]

ROW_FORM_KEY: Final = "row_form"
#: 1 (no row): every event id stored, plain envelopes; 2: see the module docstring.
ROW_FORM: Final = "2"
_FIRST_ID: Final = 1

#: The first four bytes of every zstd frame (RFC 8878).
MAGIC: Final = b"\x28\xb5\x2f\xfd"
#: The dictionary's size: larger ones shrank the frames by under 5 % here.
DICTIONARY_BYTES: Final = 64 * 1024
#: Fewer sample envelopes than this train no useful dictionary.
MIN_SAMPLES: Final = 256
_LEVEL: Final = 3
# A derived id spells the sequence with %08d; larger ones are stored as given.
_DERIVED_BELOW: Final = 10**8


class CorruptRow(Exception):
    """A stored ``event_json`` that does not decompress (the reader names the row)."""

    def __init__(self, reason: str, dictionary_id: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.dictionary_id = dictionary_id


def derived_event_id(stream_id: str, sequence: int) -> str | None:
    """The id a row of ``stream_id`` at ``sequence`` gets when its ``event_id`` is NULL.

    It is the id pentrace gives the events of a session's stream
    (``evt:<stream>:<%08d>``, :meth:`SessionKey.event_id`); the SQL of
    :func:`.schema.event_id_of` computes the same string.  None for a
    sequence that %08d does not spell in eight digits.
    """
    if not 0 < sequence < _DERIVED_BELOW:
        return None
    return f"evt:{stream_id}:{sequence:08d}"


def derived_session(stream_id: str) -> str | None:
    """The session id a row of ``stream_id`` has when its ``session_id`` column is NULL:
    the last segment of a session stream (:func:`.schema.session_of` in SQL)."""
    if not stream_id.startswith("session:"):
        return None
    return stream_id[stream_id.rfind("/") + 1 :]


def stored_event_id(event_id: str, stream_id: str, sequence: int) -> str | None:
    """What the ``event_id`` column holds: None when the id is the derived one."""
    return None if event_id == derived_event_id(stream_id, sequence) else event_id


def parse_derived(event_id: str) -> tuple[str, int] | None:
    """The (stream, sequence) whose derived id is ``event_id``, or None."""
    head, _, digits = event_id.rpartition(":")
    if not head.startswith("evt:") or len(digits) != 8 or not digits.isdigit():
        return None
    stream, sequence = head[4:], int(digits)
    return (stream, sequence) if derived_event_id(stream, sequence) == event_id else None


def train_dictionary(samples: list[bytes], dictionary_id: int) -> bytes:
    """A zstd dictionary of at most :data:`DICTIONARY_BYTES` trained on plain envelopes."""
    chunks: list[bytes | bytearray | memoryview] = list(samples)
    trained = zstandard.train_dictionary(
        DICTIONARY_BYTES, chunks, dict_id=dictionary_id, level=_LEVEL
    )
    return trained.as_bytes()


@dataclass
class RowCodec:
    """A ledger's dictionaries and row form; ``current`` compresses new rows (None: plain).

    ``derived_ids`` says the ledger is of row form 2 (created by this
    version): its columns leave out what the row spells otherwise (a derived
    event id, :func:`.rows._stored_values`); earlier ones keep every value.
    """

    dictionaries: Mapping[int, bytes] = field(default_factory=dict)
    current: int | None = None
    derived_ids: bool = False
    _local: threading.local = field(default_factory=threading.local, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_local"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _local=threading.local())

    def stored_json(self, plain: bytes) -> bytes:
        """``plain`` as the ledger stores it: one zstd frame, or as is without a dictionary."""
        if self.current is None:
            return plain
        result: bytes = self._compressor().compress(plain)
        return result

    def stored_many(self, plains: list[bytes]) -> list[bytes]:
        """:meth:`stored_json` of each of ``plains`` (the same frames, one per value, each
        decompressible alone), made in one call: a session's envelopes at once."""
        if self.current is None or not plains:
            return list(plains)
        chunks: list[bytes | bytearray | memoryview] = list(plains)
        frames = self._compressor().multi_compress_to_buffer(chunks)
        return [frames[index].tobytes() for index in range(len(frames))]

    def _compressor(self) -> zstandard.ZstdCompressor:
        compressor: zstandard.ZstdCompressor | None = getattr(self._local, "compressor", None)
        if compressor is None:
            assert self.current is not None
            data = zstandard.ZstdCompressionDict(self.dictionaries[self.current])
            compressor = self._local.compressor = zstandard.ZstdCompressor(
                level=_LEVEL, dict_data=data, write_checksum=False, write_dict_id=True
            )
        return compressor

    def decoder(self) -> Callable[[bytes], bytes]:
        """A function from stored ``event_json`` to the plain envelope, for this thread.

        It raises :class:`CorruptRow` on a frame it cannot read; a page
        takes it once and calls it per row.
        """
        decode = getattr(self._local, "decode", None)
        if decode is None:
            decode = self._local.decode = self._make_decoder()
        return decode

    def plain_json(self, stored: bytes) -> bytes:
        """:meth:`decoder` for one value."""
        return self.decoder()(stored)

    def plain_list(self, stored: list[bytes]) -> list[bytes]:
        """:meth:`decoder` over a page's values, in one comprehension where all is well
        (a page of frames of the current dictionary): no Python call of ours per row."""
        usual = getattr(self._local, "usual", None)
        if usual is None and self.current is not None:
            data = zstandard.ZstdCompressionDict(self.dictionaries[self.current])
            usual = self._local.usual = zstandard.ZstdDecompressor(dict_data=data).decompress
        if usual is not None:
            try:
                return [usual(value) if value[:4] == MAGIC else value for value in stored]
            except zstandard.ZstdError:
                pass  # another dictionary's frame, or a damaged one: row by row
        decode = self.decoder()
        return [decode(value) for value in stored]

    def _make_decoder(self) -> Callable[[bytes], bytes]:
        contexts: dict[int, Callable[[bytes], bytes]] = {}
        for dictionary_id, content in self.dictionaries.items():
            data = zstandard.ZstdCompressionDict(content)
            contexts[dictionary_id] = zstandard.ZstdDecompressor(dict_data=data).decompress
        usual = contexts.get(self.current) if self.current is not None else None
        error = zstandard.ZstdError

        def other(stored: bytes) -> bytes:
            try:
                wanted = zstandard.get_frame_parameters(stored).dict_id
            except error as problem:
                raise CorruptRow(f"not a readable zstd frame ({problem})") from None
            decompress = contexts.get(wanted)
            if decompress is None:
                raise CorruptRow("its dictionary is not in the ledger", wanted)
            try:
                return decompress(stored)
            except (error, MemoryError) as problem:
                raise CorruptRow(f"the frame does not decompress ({problem})", wanted) from None

        def decode(stored: bytes) -> bytes:
            if type(stored) is not bytes:
                stored = bytes(stored)
            if stored[:4] != MAGIC:
                return stored
            if usual is not None:
                try:
                    return usual(stored)
                except error:
                    pass
            return other(stored)

        return decode


def row_form(conn: Connection, tables: LedgerTables) -> str:
    """The ledger's recorded row form ("1" when none is recorded: an earlier ledger)."""
    meta = tables.meta
    value = conn.execute(
        select(meta.c.value).where(meta.c.key == ROW_FORM_KEY)
    ).scalar_one_or_none()
    return "1" if value is None else str(value)


def mark_new_form(conn: Connection, db: LedgerDatabase) -> None:
    """Record that the ledger was created with today's row form (once, race-safe)."""
    meta = db.tables.meta
    statement = db.dialect.upsert(meta).values(key=ROW_FORM_KEY, value=ROW_FORM)
    conn.execute(statement.on_conflict_do_nothing(index_elements=[meta.c.key]))


def read_codec(engine: Engine, tables: LedgerTables) -> RowCodec:
    """The codec of the ledger as stored now (a ledger without the tables: plain rows)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table(tables.dictionaries.name):
            return RowCodec()
        table = tables.dictionaries
        found = conn.execute(
            select(table.c.dictionary_id, table.c.content).order_by(table.c.dictionary_id)
        ).all()
        form = row_form(conn, tables)
    dictionaries = {int(key): bytes(content) for key, content in found}
    current = max(dictionaries) if dictionaries else None
    return RowCodec(dictionaries, current, derived_ids=form == ROW_FORM)


def add_dictionary(db: LedgerDatabase, samples: list[bytes], now_ms: int) -> RowCodec:
    """Train a dictionary on ``samples`` (plain envelopes), store it, and return the codec
    every writer now uses (this one's dictionary, or the one another writer stored first)."""
    table = db.tables.dictionaries
    with db.reading("read the ledger's dictionaries") as conn:
        held = conn.execute(select(func.max(table.c.dictionary_id))).scalar_one_or_none()
    next_id = int(held or 0) + 1 if held is not None else _FIRST_ID
    return store_dictionary(db, next_id, train_dictionary(samples, next_id), now_ms, len(samples))


def store_dictionary(
    db: LedgerDatabase, dictionary_id: int, content: bytes, now_ms: int, samples: int
) -> RowCodec:
    """Store a trained dictionary under ``dictionary_id`` unless one is there already (then
    this one is dropped), and return the codec read back: the same for every writer."""
    table = db.tables.dictionaries
    with db.writing("store a ledger dictionary") as conn:
        statement = db.dialect.upsert(table).values(
            dictionary_id=dictionary_id, content=content, created_at=now_ms, samples=samples
        )
        conn.execute(statement.on_conflict_do_nothing(index_elements=[table.c.dictionary_id]))
    return db.reload_codec()


def read_plain(
    db: LedgerDatabase, rows: Sequence[Any], json_at: int, position_at: int | None
) -> list[bytes]:
    """The plain envelope of column ``json_at`` of each of ``rows``, in order.

    A frame of a dictionary this process has not seen yet (another writer
    trained one) reloads the dictionaries once; a frame that still does not
    decompress is a :class:`LedgerError` naming the ledger and the row (its
    notification id, column ``position_at``).
    """
    stored = [row[json_at] for row in rows]
    for attempt in (1, 2):
        try:
            return db.codec.plain_list(stored)
        except CorruptRow as error:
            if attempt == 1 and error.dictionary_id not in (None, *db.codec.dictionaries):
                db.reload_codec()
                continue
            raise _corrupt(db, error, rows, json_at, position_at) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _corrupt(
    db: LedgerDatabase,
    error: CorruptRow,
    rows: Sequence[Any],
    json_at: int,
    position_at: int | None,
) -> LedgerError:
    decode = db.codec.decoder()
    where = "a row"
    for row in rows:
        try:
            decode(row[json_at])
        except CorruptRow as found:
            error = found
            if position_at is not None:
                where = f"notification {row[position_at]}"
            break
    named = "" if error.dictionary_id is None else f" (dictionary {error.dictionary_id})"
    return LedgerError(
        f"read the ledger on {db.where}: the stored envelope of {where} cannot be read: "
        f"{error.reason}{named}",
        hint="the ledger row or its dictionaries table is damaged; "
        "`pentrace ledger rebuild` indexes the traces again",
    )
