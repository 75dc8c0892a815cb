"""The bounded GGUF header reader against gguf's own reader and against corrupt files."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import gguf
import numpy as np
import pytest

from tests.engine.models.made_models import write_small_model, written
from workbench.engine.base.errors import ModelFileError
from workbench.engine.models import gguf_header
from workbench.engine.models.gguf_header import GgufHeader, read_gguf_header
from workbench.engine.models.memory import read_model_facts


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> Path:
    return write_small_model(tmp_path_factory.mktemp("model") / "small.gguf")


def agrees_with_gguf(path: Path) -> tuple[GgufHeader, set[str]]:
    """Read ``path`` with both readers: every field this reader keeps, every tensor and the
    data offset are what gguf's ``GGUFReader`` says. Returns this reader's header and the
    keys it stepped over."""
    theirs = gguf.GGUFReader(str(path))
    ours = read_gguf_header(path)
    for key, value in ours.fields.items():
        expected = theirs.fields[key].contents()
        assert value == (tuple(expected) if isinstance(expected, list) else expected), key
    assert [(t.name, t.shape, t.ggml_type, t.offset, t.n_bytes) for t in ours.tensors] == [
        (
            t.name,
            tuple(int(d) for d in t.shape),
            int(t.tensor_type),
            int(t.data_offset) - theirs.data_offset,
            int(t.n_bytes),
        )
        for t in theirs.tensors
    ]
    assert ours.data_offset == theirs.data_offset
    return ours, {k for k in theirs.fields if not k.startswith("GGUF.")} - set(ours.fields)


@pytest.mark.server  # gguf reads the 49,152-token vocabulary one item at a time: 4 s
def test_the_header_reader_agrees_with_gguf_on_the_default_model(model_path):
    header, stepped_over = agrees_with_gguf(model_path)
    assert (header.version, len(header.fields), len(header.tensors)) == (3, 29, 272)
    assert stepped_over == {
        "general.languages",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.merges",
    }


def test_the_ggml_block_sizes_are_ggufs():
    assert {int(t): size for t, size in gguf.GGML_QUANT_SIZES.items()} == gguf_header.GGML_BLOCKS


@pytest.fixture(scope="module")
def varied_model(tmp_path_factory) -> Path:
    """Every kind of value the reader keeps or steps over, a per-layer KV head array, a
    custom alignment and tensors of three types."""
    path = tmp_path_factory.mktemp("varied") / "varied.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_custom_alignment(64)
    writer.add_name("Varied")
    writer.add_array("tokenizer.ggml.tokens", ["<s>", "", "héllo", "x" * 300])
    writer.add_string("tokenizer.chat_template", "{{ x }}" * 10_000)  # over 64 KiB
    writer.add_array("tokenizer.ggml.scores", [0.5] * 5000)
    writer.add_array("nested", [[1, 2], [3], [[4]]])
    writer.add_block_count(4)
    writer.add_embedding_length(256)
    writer.add_head_count(8)
    writer.add_array("llama.attention.head_count_kv", [2, 4, 2, 4])
    writer.add_key_length(48)
    writer.add_uint8("u8", 255)
    writer.add_int8("i8", -128)
    writer.add_uint16("u16", 65535)
    writer.add_int16("i16", -32768)
    writer.add_int32("i32", -(2**31))
    writer.add_uint64("u64", 2**64 - 1)
    writer.add_int64("i64", -(2**63))
    writer.add_float32("f32", 0.1)
    writer.add_float64("f64", 0.1)
    writer.add_bool("yes", True)
    writer.add_file_type(1)  # F16
    writer.add_tensor("f16", np.zeros((7, 5), dtype=np.float16))
    q8 = gguf.GGMLQuantizationType.Q8_0
    writer.add_tensor("q8", np.zeros((2, 34), dtype=np.uint8), raw_dtype=q8)
    writer.add_tensor("i32", np.zeros(3, dtype=np.int32))
    return written(writer, path)


def test_the_header_reader_keeps_numbers_and_steps_over_vocabularies(varied_model):
    header, stepped_over = agrees_with_gguf(varied_model)
    assert header.fields == {
        "general.architecture": "llama",
        "general.alignment": 64,
        "general.name": "Varied",
        "llama.block_count": 4,
        "llama.embedding_length": 256,
        "llama.attention.head_count": 8,
        "llama.attention.head_count_kv": (2, 4, 2, 4),
        "llama.attention.key_length": 48,
        "u8": 255,
        "i8": -128,
        "u16": 65535,
        "i16": -32768,
        "i32": -(2**31),
        "u64": 2**64 - 1,
        "i64": -(2**63),
        "f32": struct.unpack("<f", struct.pack("<f", 0.1))[0],
        "f64": 0.1,
        "yes": True,
        "general.file_type": 1,
    }
    assert stepped_over == {
        "tokenizer.ggml.tokens",
        "tokenizer.chat_template",
        "tokenizer.ggml.scores",
        "nested",
    }
    assert [(t.name, t.shape, t.offset, t.n_bytes) for t in header.tensors] == [
        ("f16", (5, 7), 0, 70),
        ("q8", (32, 2), 128, 68),
        ("i32", (3,), 256, 12),
    ]
    assert header.data_offset % 64 == 0
    facts = read_model_facts(varied_model)
    assert (facts.kv_heads, facts.head_k, facts.head_v) == ((2, 4, 2, 4), 48, 48)
    assert (facts.name, facts.quantization, facts.tensor_bytes) == ("Varied", "F16", 150)


def gguf_bytes(kv_count: int, key_values: bytes, tensor_count: int = 0, version: int = 3) -> bytes:
    """A GGUF header written byte by byte, so that counts and lengths can lie."""
    return b"GGUF" + struct.pack("<IQQ", version, tensor_count, kv_count) + key_values


def text(value: str) -> bytes:
    return struct.pack("<Q", len(value.encode())) + value.encode()


def key_value(key: str, value_type: int, value: bytes) -> bytes:
    return text(key) + struct.pack("<I", value_type) + value


def array(item_type: int, count: int, items: bytes = b"") -> bytes:
    return struct.pack("<IQ", item_type, count) + items


PAD = key_value("padding", 8, text("." * 64))  # a string so that check_gguf's minimum size is met


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (gguf_bytes(1, PAD, version=1), "GGUF version 1; this reader knows versions 2 and 3"),
        (b"GGUF" + struct.pack(">IQQ", 3, 0, 1) + PAD, "a big-endian GGUF"),
        (gguf_bytes(1, PAD, tensor_count=2**63), "count is 9223372036854775808, more than 65536"),
        (gguf_bytes(2**40, PAD), "the key/value count is 1099511627776, more than 65536"),
        (gguf_bytes(60_000, PAD), "count is 60000, more than the rest of the file can hold"),
        (gguf_bytes(1, struct.pack("<Q", 2**62) + PAD), "a key is 4611686018427387904 bytes"),
        (gguf_bytes(2, PAD + key_value("x", 13, b"")), "'x' has value type 13, which GGUF"),
        (gguf_bytes(2, PAD + key_value("x", 9, array(13, 1))), "'x' is an array of type 13"),
        (
            gguf_bytes(2, PAD + key_value("x", 9, array(8, 2**61))),
            "the item count of 'x' is 2305843009213693952, more than the rest of the file",
        ),
        (
            gguf_bytes(2, PAD + key_value("x", 9, array(4, 2**40))),
            "the item count of 'x' is 1099511627776, more than the rest of the file",
        ),
        (
            gguf_bytes(2, PAD + key_value("x", 8, struct.pack("<Q", 2**62))),
            "the value of 'x' runs past the end of the file",
        ),
        (
            gguf_bytes(2, PAD + key_value("x", 8, struct.pack("<Q", 100) + b"short")),
            "the value of 'x' runs past the end of the file",
        ),
        (
            gguf_bytes(2, PAD + key_value("x", 9, array(9, 1, array(9, 1) * 9))),
            "'x' nests arrays more than 8 deep",
        ),
        (
            gguf_bytes(2, PAD + key_value("general.alignment", 4, struct.pack("<I", 48))),
            "general.alignment is 48, not a power of two",
        ),
        (
            gguf_bytes(1, PAD, 1) + text("t") + struct.pack("<I", 5) + bytes(40),
            "tensor 't' has 5 dimensions (at most 4)",
        ),
        (
            gguf_bytes(1, PAD, 1) + text("t") + struct.pack("<IQIQ", 1, 8, 99, 0),
            "tensor 't' has ggml type 99, unknown to this reader",
        ),
        (
            gguf_bytes(1, PAD, 1) + text("t") + struct.pack("<IQIQ", 1, 2**40, 0, 0),
            "the data of tensor 't' runs past the end of the file",
        ),
    ],
)
def test_a_corrupt_header_is_a_clear_error(tmp_path, data, error):
    path = tmp_path / "corrupt.gguf"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match="is not a readable GGUF file: ") as raised:
        read_gguf_header(path)
    assert error in str(raised.value)


def test_the_totals_are_bounded_too(tmp_path, monkeypatch):
    path = tmp_path / "many.gguf"
    monkeypatch.setattr(gguf_header, "MAX_WALKED_ITEMS", 10)
    path.write_bytes(gguf_bytes(2, PAD + key_value("x", 9, array(8, 11, text("") * 11))))
    with pytest.raises(ModelFileError, match="more than 10 strings or inner arrays in all"):
        read_gguf_header(path)
    path.write_bytes(gguf_bytes(2, PAD + key_value("x", 9, array(8, 10, text("") * 10))))
    assert read_gguf_header(path).fields == {"padding": "." * 64}
    monkeypatch.setattr(gguf_header, "MAX_KEPT_BYTES", len("padding") + 64 + len("x") + 8)
    assert read_gguf_header(path).fields == {"padding": "." * 64}  # the strings are not kept
    path.write_bytes(gguf_bytes(2, PAD + key_value("x", 9, array(10, 1, bytes(8)))))
    assert read_gguf_header(path).fields == {"padding": "." * 64, "x": (0,)}
    path.write_bytes(gguf_bytes(2, PAD + key_value("x", 9, array(10, 2, bytes(16)))))
    with pytest.raises(ModelFileError, match=r"its names and values take more than 80 bytes"):
        read_gguf_header(path)


def test_a_header_cut_anywhere_is_a_clear_error(small_model, tmp_path):
    data_offset = read_gguf_header(small_model).data_offset
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(small_model.read_bytes())
    for size in [data_offset + 64 * 16 * 4 - 1, *range(data_offset, 63, -1)]:
        os.truncate(cut, size)
        with pytest.raises(ModelFileError, match=r"\(truncated or corrupt\)$"):
            read_gguf_header(cut)


def test_string_arrays_read_in_blocks_of_any_size(tmp_path, monkeypatch):
    """Strings cut by the edge of a block, kept or stepped over, read as they do in one
    block, and the keys after them are still found; an array cut short is a clear error."""
    path = tmp_path / "vocab.gguf"
    words = ["", "a", "ab" * 20, "é" * 9, "x" * 300, *(f"w{i}" for i in range(40))]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_array("tokenizer.ggml.tokens", words)
    writer.add_array("tokenizer.ggml.merges", list(reversed(words)))
    writer.add_context_length(4096)
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    written(writer, path)
    kept = frozenset({"tokenizer.ggml.tokens"})
    whole = read_gguf_header(path, kept)
    assert whole.fields["tokenizer.ggml.tokens"] == tuple(words)
    assert "tokenizer.ggml.merges" not in whole.fields
    assert whole.fields["llama.context_length"] == 4096
    for block in (1, 7, 64):
        monkeypatch.setattr(gguf_header, "STRINGS_BLOCK", block)
        assert read_gguf_header(path, kept) == whole
        monkeypatch.setattr(gguf_header, "MAX_VOCAB_BYTES", 100)
        with pytest.raises(ModelFileError, match="vocabulary takes more than 100 bytes"):
            read_gguf_header(path, kept)
        monkeypatch.undo()
    data = path.read_bytes()
    cut = tmp_path / "cut.gguf"
    for block in (7, gguf_header.STRINGS_BLOCK):
        monkeypatch.setattr(gguf_header, "STRINGS_BLOCK", block)
        for size in range(data.index(b"x" * 300) + 150, data.rindex(b"x" * 300) + 150, 37):
            cut.write_bytes(data[:size])
            with pytest.raises(ModelFileError, match=r"\(truncated or corrupt\)$"):
                read_gguf_header(cut, kept)
