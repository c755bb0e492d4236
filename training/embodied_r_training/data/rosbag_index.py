"""A bag's own index, read beside rosbags: message stamps without reading the messages, and single records.

rosbags' public API reads messages in whole chunks, and a chunk mixes topics, so reading the stamps or a
few messages of one topic reads the whole bag (277 MB for 300 odometry messages of a raw-image bag). The
index is in the files: mcap message-index records and the sqlite3 ``timestamp`` column. Reaching it needs
rosbags' PRIVATE reader state, and all of that access is in this module:

* ``Reader.storage.storages``: the per-file readers of the open bag;
* an mcap file reader's ``chunks`` (parsed chunk indexes: ``chunk_start_offset``, ``compression``,
  ``message_index_offsets``), ``bio`` (the open file) and ``connections`` (with the file's channel ids);
* an sqlite3 file reader's ``path``.

Written against rosbags 0.11.9 (requirements.txt). When a rosbags release changes these, every function
here returns None, :class:`~embodied_r_training.data.bag_reader.BagReader` reads through the public API
(correct, slower) and logs a warning; ``test/test_prepare.py`` fails so that the change is noticed.
"""

from __future__ import annotations

import logging
import sqlite3
import struct
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

WRITTEN_FOR_ROSBAGS = "0.11.9"


class IndexError_(Exception):
    """A record at an offset of the index is not what the index says (a damaged file)."""


def _storage_files(reader: Any) -> list[Any]:
    """The per-file readers of an open ``rosbags.rosbag2.Reader`` (private), [] when they are not there."""
    return list(getattr(getattr(reader, "storage", None), "storages", None) or [])


def channel_id(reader: Any, topic: str) -> int | None:
    """The first storage file's id of ``topic`` (rosbags may renumber connections across files)."""
    found = [
        c.id for s in _storage_files(reader)[:1] for c in getattr(s, "connections", ()) if c.topic == topic
    ]
    return found[0] if len(found) == 1 else None


class McapIndex:
    """Messages of a single-file mcap bag read through its message indexes, one record at a time.

    The message index records (mcap spec, opcode 0x07: u16 channel id, u32 byte length, then (u64 log
    time, u64 offset) pairs) give each message's stamp and, in an uncompressed chunk, its place in the file,
    so one seek reads just that message. ``readable`` is False when a chunk is compressed (then only the
    stamps are used and rosbags reads the messages).
    """

    def __init__(self, storage: Any) -> None:
        self.bio = storage.bio
        self.chunks = list(storage.chunks)
        self.readable = all(not chunk.compression for chunk in self.chunks)

    def entries(self, channel: int) -> list[tuple[int, int]] | None:
        """(log time, file offset of its record) of a channel's messages, by time; None if not indexed."""
        found: list[tuple[int, int]] = []
        for chunk in self.chunks:
            offset = chunk.message_index_offsets.get(channel)
            if offset is None:
                continue
            self.bio.seek(offset)
            opcode, length = struct.unpack("<BQ", self.bio.read(9))
            record = self.bio.read(length)
            found_channel, size = struct.unpack_from("<HI", record, 0)
            if opcode != 0x07 or found_channel != channel or 6 + size > len(record) or size % 16:
                return None
            # Records of a chunk start after its header: 9 + 40 bytes and the compression name.
            records = chunk.chunk_start_offset + 9 + 40 + len(chunk.compression)
            found.extend((t, records + o) for t, o in struct.iter_unpack("<QQ", record[6 : 6 + size]))
        found.sort()
        return found

    def read(self, offset: int) -> bytes:
        """The serialized message of the message record at ``offset`` (uncompressed chunks only)."""
        self.bio.seek(offset)
        opcode, length = struct.unpack("<BQ", self.bio.read(9))
        if opcode != 0x05 or length < 22:
            raise IndexError_(f"no message record at offset {offset} (opcode {opcode:#x})")
        data = self.bio.read(length)[22:]  # channel id, sequence, log time, publish time, then the data
        if len(data) != length - 22:
            raise IndexError_(f"message record at offset {offset} is truncated")
        return data


def mcap_index(reader: Any, storage: str, path: Path) -> McapIndex | None:
    """Index access for a single-file, chunked mcap bag (``storage`` "mcap"), else None (warns when rosbags
    hides it); ``path`` names the bag in the warning."""
    files = _storage_files(reader)
    if not files:
        _warn_unavailable(path)
        return None
    if len(files) != 1 or storage != "mcap":
        return None
    file = files[0]
    if not all(hasattr(file, name) for name in ("chunks", "bio", "connections")):
        _warn_unavailable(path)
        return None
    return McapIndex(file) if file.chunks else None


def sqlite_stamps(reader: Any, topic: str) -> list[int] | None:
    """Recorded stamps of a topic's messages in a single-file rosbag2 sqlite3 bag (the stamps column only)."""
    files = _storage_files(reader)
    database = Path(getattr(files[0], "path", "")) if len(files) == 1 else None
    if database is None or database.suffix != ".db3":
        return None
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        rows = connection.execute(
            "SELECT m.timestamp FROM messages m JOIN topics t ON m.topic_id = t.id WHERE t.name = ?", (topic,)
        ).fetchall()
    return [int(row[0]) for row in rows]


def _warn_unavailable(path: Path) -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("rosbags")
    except PackageNotFoundError:
        installed = "?"
    logger.warning(
        "bag %s: rosbags %s does not expose the bag index this reader was written for (rosbags %s); "
        "reading whole chunks instead (correct, slower). Pin rosbags==%s or update rosbag_index.py",
        path, installed, WRITTEN_FOR_ROSBAGS, WRITTEN_FOR_ROSBAGS,
    )  # fmt: skip
