"""A bag's MCAP chunks are bounded before rosbags decompresses them (``bags/mcap_chunks.py``): a few
megabytes of zstd or lz4 can stand for gigabytes, and a chunk's stated size may lie."""
from __future__ import annotations

import struct

import lz4.frame
import pytest

from cbcl_pr_ros.bags import BagFormatError, bag_info
from cbcl_pr_ros.bags import mcap_chunks
from cbcl_pr_ros.bags.mcap_chunks import MCAP_MAGIC, check_mcap_chunks

from .conftest import write_synthetic

zstd = mcap_chunks.zstd  # the standard library's module where it has one, else its backport


def _record(op: int, body: bytes) -> bytes:
    return bytes([op]) + struct.pack("<Q", len(body)) + body


def _chunk(data: bytes, compression: str, stated: int) -> bytes:
    name = compression.encode()
    return _record(0x06, struct.pack("<QQQI", 0, 0, stated, 0) + struct.pack("<I", len(name)) + name
                   + struct.pack("<Q", len(data)) + data)


def _mcap(path, *chunks: bytes) -> None:
    header = _record(0x01, struct.pack("<I", 0) + struct.pack("<I", 0))
    path.write_bytes(MCAP_MAGIC + header + b"".join(chunks) + _record(0x02, bytes(20)) + MCAP_MAGIC)


def test_honest_chunks_of_every_compression_pass_and_are_counted(tmp_path):
    raw = bytes(range(256)) * 4000
    f = tmp_path / "ok.mcap"
    _mcap(f, _chunk(raw, "", len(raw)), _chunk(zstd.compress(raw), "zstd", len(raw)),
          _chunk(lz4.frame.compress(raw), "lz4", len(raw)),
          _chunk(zstd.compress(raw[:1000]) + zstd.compress(raw[1000:]), "zstd", len(raw)))  # two frames
    assert check_mcap_chunks(f) == 4


def test_a_chunk_that_states_too_much_or_holds_more_than_it_states_is_refused_unread(tmp_path):
    big = bytes(64 * 1024 * 1024)  # 64 MiB of zeros: a few KiB compressed
    f = tmp_path / "big.mcap"
    _mcap(f, _chunk(zstd.compress(big), "zstd", len(big)))
    assert check_mcap_chunks(f) == 1
    with pytest.raises(ValueError, match="states 67108864 bytes decompressed; at most 1048576"):
        check_mcap_chunks(f, max_chunk_bytes=1024 * 1024)
    for compression, data in (("zstd", zstd.compress(big)), ("lz4", lz4.frame.compress(big))):
        _mcap(f, _chunk(data, compression, 1000))  # a lie: 64 MiB stated as 1000 bytes
        with pytest.raises(ValueError, match="chunk 1 decompresses to more than the 1000 bytes it states"):
            check_mcap_chunks(f)


def test_corrupt_or_unknown_compression_is_one_error(tmp_path):
    f = tmp_path / "bad.mcap"
    _mcap(f, _chunk(b"garbage that is no zstd frame at all", "zstd", 100))
    with pytest.raises(ValueError, match="not valid zstd data"):
        check_mcap_chunks(f)
    _mcap(f, _chunk(b"abc", "bz2", 3))
    with pytest.raises(ValueError, match="compression 'bz2'"):
        check_mcap_chunks(f)
    f.write_bytes(b"not a bag at all")
    with pytest.raises(ValueError, match="not an MCAP file"):
        check_mcap_chunks(f)
    _mcap(f, _chunk(zstd.compress(bytes(1000)), "zstd", 1000)[:-10])  # cut short: rosbags says why
    f.write_bytes(f.read_bytes()[:-40])
    check_mcap_chunks(f)


def test_the_bag_tools_refuse_a_bomb_in_a_bag_folder_before_rosbags_opens_it(tmp_path):
    bag = tmp_path / "bag"
    write_synthetic(bag)
    assert bag_info(bag).message_count > 0  # the writer's own bag passes the check
    mcap = next(bag.glob("*.mcap"))
    big = bytes(64 * 1024 * 1024)
    _mcap(mcap, _chunk(zstd.compress(big), "zstd", 1000))
    with pytest.raises(BagFormatError, match="decompresses to more than the 1000 bytes"):
        bag_info(bag)
