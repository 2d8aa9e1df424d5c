"""A bag's MCAP chunks checked before rosbags reads them: what each holds once decompressed, bounded.

rosbags decompresses a chunk whole, trusting nothing but then also bounding nothing: a few megabytes
of zstd or lz4 can stand for gigabytes, and with no summary section it decompresses every chunk while
the bag is only being opened. A bag is a file someone hands us, so each chunk's stated size is
checked against :data:`MAX_CHUNK_BYTES` and its data decompressed here in pieces, never to more than
the size it states (one spare byte tells a lie), before rosbags sees the file. This costs one more
decompression pass over the bag; uncompressed chunks cost a seek.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO, Callable

import lz4.frame

try:  # the standard library's from Python 3.14, the same API before
    from compression import zstd  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the Python version
    from backports import zstd  # type: ignore[import-not-found,no-redef]

__all__ = ["MAX_CHUNK_BYTES", "MCAP_MAGIC", "check_mcap_chunks"]

#: the most one chunk may hold decompressed: rosbag2 closes a chunk at a few MiB, but a chunk holds at
#: least one message, and a request image may have 64 MiB (``max_image_bytes``)
MAX_CHUNK_BYTES = 256 * 1024 * 1024
MCAP_MAGIC = b"\x89MCAP0\r\n"
_CHUNK = 0x06
_FOOTER = 0x02
_PIECE = 1 << 20  # compressed bytes fed to a decompressor at a time


def check_mcap_chunks(path: str | Path, max_chunk_bytes: int = MAX_CHUNK_BYTES) -> int:
    """How many chunks ``path`` (an MCAP file) holds; ValueError naming the first chunk that states more
    than ``max_chunk_bytes``, decompresses to more than it states, or uses a compression rosbags cannot
    read. Records are walked by their length fields; a file cut short ends the walk (rosbags says why)."""
    chunks = 0
    with open(path, "rb") as f:
        if f.read(len(MCAP_MAGIC)) != MCAP_MAGIC:
            raise ValueError("not an MCAP file (its first bytes are not the MCAP magic)")
        while True:
            head = f.read(9)
            if len(head) < 9:
                return chunks
            op, length = head[0], struct.unpack("<Q", head[1:])[0]
            end = f.tell() + length
            if op == _FOOTER:
                return chunks
            if op == _CHUNK:
                chunks += 1
                _check_chunk(f, chunks, max_chunk_bytes)
            f.seek(end)


def _check_chunk(f: BinaryIO, index: int, max_chunk_bytes: int) -> None:
    fixed = f.read(28 + 4)
    if len(fixed) < 32:
        return  # cut short: rosbags reports the truncated file
    _, _, stated, _, name_len = struct.unpack("<QQQII", fixed)
    if name_len > 16:
        raise ValueError(f"chunk {index} names a compression of {name_len} bytes")
    compression = f.read(name_len).decode("ascii", "replace")
    if stated > max_chunk_bytes:
        raise ValueError(f"chunk {index} states {stated} bytes decompressed; at most {max_chunk_bytes} are read")
    size_bytes = f.read(8)
    if len(size_bytes) < 8:
        return
    compressed = struct.unpack("<Q", size_bytes)[0]
    if compression == "":
        return
    if compression not in _DECOMPRESSORS:
        raise ValueError(f"chunk {index} uses compression {compression!r} (lz4, zstd or none are read)")
    try:
        got = _bounded_output(f, compressed, _DECOMPRESSORS[compression], stated + 1)
    except Exception as exc:  # each library raises its own error for corrupt data
        raise ValueError(f"chunk {index} is not valid {compression} data ({type(exc).__name__})") from None
    if got > stated:
        raise ValueError(f"chunk {index} decompresses to more than the {stated} bytes it states")


def _bounded_output(f: BinaryIO, compressed: int, make: Callable[[], object], limit: int) -> int:
    """Bytes the ``compressed`` bytes at ``f`` decompress to, counted up to ``limit`` (never more held
    than one piece's output). Data after a frame's end starts another frame, as rosbags reads it."""
    out, left, pending = 0, compressed, b""
    dec = make()
    while out < limit:
        fed = bool(pending)
        if not pending and dec.needs_input:
            if left <= 0:
                break
            pending = f.read(min(_PIECE, left))
            if not pending:
                break  # cut short
            left -= len(pending)
            fed = True
        got = len(dec.decompress(pending, max_length=limit - out))
        out += got
        pending = b""
        if not (got or fed or dec.eof):
            break  # nothing more comes out of what was given
        if dec.eof:
            rest = dec.unused_data
            if not rest and left <= 0:
                break
            dec, pending = make(), rest
    return out


_DECOMPRESSORS: dict[str, Callable[[], object]] = {
    "zstd": zstd.ZstdDecompressor,
    "lz4": lz4.frame.LZ4FrameDecompressor,
}
