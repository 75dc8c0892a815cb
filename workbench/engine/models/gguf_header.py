"""A bounded reader of a GGUF file's header: the metadata key/values the planner needs and the
tensor infos, without building the vocabulary.

gguf's ``GGUFReader`` makes a numpy view of every key/value, including the ~100k vocabulary
strings and merges of even a small model, which takes seconds; the planner needs a dozen
numbers. This reader walks the same layout (GGUF v2/v3, little-endian): magic, u32 version,
u64 tensor count, u64 key/value count, the key/values (key string, u32 value type, value; an
array is u32 item type + u64 count + items; a string is u64 length + bytes), then the tensor
infos (name, u32 dimension count, u64 per dimension, u32 ggml type, u64 data offset), then
the tensor data from the next multiple of ``general.alignment``.

String arrays, nested arrays, long numeric arrays and long strings are stepped over (seeking
past them), not kept. A string array (a vocabulary, its merges: tens of thousands of short
strings) is walked a block of the file at a time, not with a read and a seek per string.
Every count and length is checked against the bytes left in the file and against fixed
limits before it is used, so a truncated, corrupt or hostile file gives a ``ModelFileError``
that says what is wrong, never a huge allocation or a long walk.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from workbench.engine.base.errors import ModelFileError
from workbench.engine.models.model_file import check_gguf, resolve_model

VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_NAME_BYTES = 65535  # a key or tensor name (the GGUF spec's limit for keys)
MAX_KEYS = 65536
MAX_TENSORS = 1 << 16  # models have hundreds to a few thousand
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NESTING = 8  # arrays of arrays
MAX_KEPT_STRING_BYTES = 64 * 1024  # longer values (chat templates, licences) are stepped over
MAX_KEPT_ARRAY_ITEMS = 4096  # per-layer numbers are kept; vocabulary-sized arrays are not
MAX_WALKED_ITEMS = 1 << 22  # strings and inner arrays stepped over one by one, in all
MAX_KEPT_BYTES = 4 << 20  # names and kept values, in all (a real model's take ~100 KiB)
MAX_VOCAB_BYTES = 64 << 20  # string arrays kept on request (a 256k vocabulary takes ~4 MiB)
STRINGS_BLOCK = 1 << 20  # bytes of a string array read at once

STRING, ARRAY = 8, 9
SCALARS = {  # GGUF value type: struct format
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
# Bytes the smallest value of each type takes in the file (a string or array: its header).
MIN_BYTES = {t: struct.calcsize(f) for t, f in SCALARS.items()} | {STRING: 8, ARRAY: 12}
MIN_KEY_VALUE_BYTES = 8 + 4 + 1  # empty key, value type, one-byte value
MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # empty name, no dimensions, type, offset
# ggml tensor type: (elements per block, bytes per block), as in ggml.c's type traits.
GGML_BLOCKS = {
    0: (1, 4),  # F32
    1: (1, 2),  # F16
    2: (32, 18),  # Q4_0
    3: (32, 20),  # Q4_1
    6: (32, 22),  # Q5_0
    7: (32, 24),  # Q5_1
    8: (32, 34),  # Q8_0
    9: (32, 40),  # Q8_1
    10: (256, 84),  # Q2_K
    11: (256, 110),  # Q3_K
    12: (256, 144),  # Q4_K
    13: (256, 176),  # Q5_K
    14: (256, 210),  # Q6_K
    15: (256, 292),  # Q8_K
    16: (256, 66),  # IQ2_XXS
    17: (256, 74),  # IQ2_XS
    18: (256, 98),  # IQ3_XXS
    19: (256, 50),  # IQ1_S
    20: (32, 18),  # IQ4_NL
    21: (256, 110),  # IQ3_S
    22: (256, 82),  # IQ2_S
    23: (256, 136),  # IQ4_XS
    24: (1, 1),  # I8
    25: (1, 2),  # I16
    26: (1, 4),  # I32
    27: (1, 8),  # I64
    28: (1, 8),  # F64
    29: (256, 56),  # IQ1_M
    30: (1, 2),  # BF16
    34: (256, 54),  # TQ1_0
    35: (256, 66),  # TQ2_0
    39: (32, 17),  # MXFP4
    40: (64, 36),  # NVFP4
    41: (128, 18),  # Q1_0
}

# llama.cpp's llama_ftype (general.file_type): how most of the weights are quantised.
FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
}

U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")

Value = int | float | bool | str | tuple[int | float | bool, ...] | tuple[str, ...]


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # from the start of the tensor data

    @property
    def n_bytes(self) -> int:
        block, block_bytes = GGML_BLOCKS[self.ggml_type]
        return math.prod(self.shape) * block_bytes // block


@dataclass(frozen=True)
class GgufHeader:
    """What the header says. ``fields`` holds the numbers, booleans, strings of up to
    ``MAX_KEPT_STRING_BYTES``, numeric arrays of up to ``MAX_KEPT_ARRAY_ITEMS`` and the
    arrays asked for by name (as tuples); keys whose values were stepped over are absent."""

    version: int
    fields: dict[str, Value]
    tensors: tuple[TensorInfo, ...]
    data_offset: int  # where the tensor data starts in the file


def read_gguf_header(path: Path, kept_arrays: frozenset[str] = frozenset()) -> GgufHeader:
    """The header of a GGUF file, read in bounded steps (see the module's docstring). The
    arrays named in ``kept_arrays`` (a vocabulary, its scores) are kept whatever their length,
    within ``MAX_VOCAB_BYTES`` together."""
    check_gguf(path)
    try:
        size = path.stat().st_size
        with path.open("rb", buffering=1 << 16) as fh:
            return _Parser(fh, size, path, kept_arrays).header()
    except OSError as exc:
        raise ModelFileError(f"cannot read model file {path}: {exc}") from None


def loadable_model(model: str, base_dir: Path | None = None) -> Path:
    """``resolve_model``'s path, its header read through to the end of its tensors' data:
    a truncated or corrupt file is refused before any server starts, in the words ``plan``
    uses, not found by the server after a load (a failed start, a session left behind)."""
    path = resolve_model(model, base_dir)
    read_gguf_header(path)
    return path


class _Parser:
    def __init__(
        self, fh: BinaryIO, size: int, path: Path, kept_arrays: frozenset[str] = frozenset()
    ) -> None:
        self.fh, self.size, self.path = fh, size, path
        self.kept_arrays = kept_arrays
        self.pos = 0
        self.walked = 0
        self.kept = 0
        self.vocab = 0

    def error(self, what: str) -> ModelFileError:
        return ModelFileError(f"{self.path} is not a readable GGUF file: {what}")

    def take(self, n: int, what: str) -> bytes:
        if n > self.size - self.pos:
            raise self.error(f"{what} runs past the end of the file (truncated or corrupt)")
        self.pos += n
        data = self.fh.read(n)
        if len(data) != n:
            raise self.error(f"{what} could not be read: the file changed while it was read")
        return data

    def keep(self, n: int, what: str) -> bytes:
        """``take`` for bytes that become part of the header, which are bounded in all."""
        self.kept += n
        if self.kept > MAX_KEPT_BYTES:
            raise self.error(f"its names and values take more than {MAX_KEPT_BYTES} bytes")
        return self.take(n, what)

    def skip(self, n: int, what: str) -> None:
        if n > self.size - self.pos:
            raise self.error(f"{what} runs past the end of the file (truncated or corrupt)")
        self.pos += n
        self.fh.seek(n, 1)

    def u32(self, what: str) -> int:
        return U32.unpack(self.take(4, what))[0]

    def u64(self, what: str) -> int:
        return U64.unpack(self.take(8, what))[0]

    def count(self, what: str, min_bytes: int, limit: int | None = None) -> int:
        """A count read from the file, refused if it exceeds ``limit`` or if that many items
        of at least ``min_bytes`` each cannot fit in the rest of the file."""
        n = self.u64(what)
        if limit is not None and n > limit:
            raise self.error(f"{what} is {n}, more than {limit}")
        if n * min_bytes > self.size - self.pos:
            raise self.error(
                f"{what} is {n}, more than the rest of the file can hold (truncated or corrupt)"
            )
        return n

    def name(self, what: str) -> str:
        n = self.u64(what)
        if n > MAX_NAME_BYTES:
            raise self.error(f"{what} is {n} bytes long (at most {MAX_NAME_BYTES})")
        return self.keep(n, what).decode("utf-8", "replace")

    def header(self) -> GgufHeader:
        self.skip(4, "the magic")  # checked by check_gguf
        version = self.u32("the version")
        if version not in VERSIONS:
            byte_swapped = int.from_bytes(version.to_bytes(4, "little"), "big") in VERSIONS
            raise self.error(
                "a big-endian GGUF, which llama.cpp does not load on this machine"
                if byte_swapped
                else f"GGUF version {version}; this reader knows versions 2 and 3"
            )
        tensor_count = self.count("the tensor count", MIN_TENSOR_INFO_BYTES, MAX_TENSORS)
        kv_count = self.count("the key/value count", MIN_KEY_VALUE_BYTES, MAX_KEYS)
        fields: dict[str, Value] = {}
        for _ in range(kv_count):
            key = self.name("a key")
            value = self.value(self.u32(f"the type of {key!r}"), key, 0)
            if value is not None:
                fields[key] = value
        tensors = tuple(self.tensor_info() for _ in range(tensor_count))
        alignment = fields.get("general.alignment", DEFAULT_ALIGNMENT)
        if type(alignment) is not int or alignment <= 0 or alignment & (alignment - 1):
            raise self.error(f"general.alignment is {alignment!r}, not a power of two")
        data_offset = -(-self.pos // alignment) * alignment
        for tensor in tensors:
            if tensor.offset + tensor.n_bytes > self.size - data_offset:
                raise self.error(
                    f"the data of tensor {tensor.name!r} runs past the end of the file "
                    "(truncated or corrupt)"
                )
        return GgufHeader(version, fields, tensors, data_offset)

    def value(self, value_type: int, key: str, depth: int) -> Value | None:
        """The value of ``key``, or None when it is stepped over rather than kept."""
        what = f"the value of {key!r}"
        if value_type in SCALARS:
            fmt = SCALARS[value_type]
            return struct.unpack("<" + fmt, self.take(MIN_BYTES[value_type], what))[0]
        if value_type == STRING:
            n = self.u64(what)
            if n > MAX_KEPT_STRING_BYTES:
                self.skip(n, what)
                return None
            return self.keep(n, what).decode("utf-8", "replace")
        if value_type != ARRAY:
            raise self.error(f"{key!r} has value type {value_type}, which GGUF does not define")
        if depth == MAX_NESTING:
            raise self.error(f"{key!r} nests arrays more than {MAX_NESTING} deep")
        item_type = self.u32(what)
        if item_type not in MIN_BYTES:
            raise self.error(f"{key!r} is an array of type {item_type}, which GGUF does not define")
        n = self.count(f"the item count of {key!r}", MIN_BYTES[item_type])
        keep = key in self.kept_arrays and depth == 0
        if item_type in SCALARS:
            nbytes = n * MIN_BYTES[item_type]
            if n > MAX_KEPT_ARRAY_ITEMS and not keep:
                self.skip(nbytes, what)
                return None
            if keep:
                self.vocab += nbytes
                if self.vocab > MAX_VOCAB_BYTES:
                    raise self.error(f"its vocabulary takes more than {MAX_VOCAB_BYTES} bytes")
            return struct.unpack(f"<{n}{SCALARS[item_type]}", self.keep(nbytes, what))
        self.walked += n
        if self.walked > MAX_WALKED_ITEMS:
            raise self.error(f"more than {MAX_WALKED_ITEMS} strings or inner arrays in all")
        if item_type == STRING:
            return self.strings(n, what, keep=keep)
        for _ in range(n):
            self.value(ARRAY, key, depth + 1)
        return None

    def strings(self, n: int, what: str, keep: bool) -> tuple[str, ...] | None:
        """``n`` strings in a row, kept (within ``MAX_VOCAB_BYTES`` in all) or stepped over,
        read a block at a time: a read and a seek per string made a small model's header take
        60 ms."""
        kept: list[str] = []
        block, at, end = b"", 0, 0
        length_at = U64.unpack_from
        for _ in range(n):
            if end - at < 8:
                block, at = self.more(block, at, 8, what)
                end = len(block)
            (length,) = length_at(block, at)
            at += 8
            if keep:
                self.vocab += length
                if self.vocab > MAX_VOCAB_BYTES:
                    raise self.error(f"its vocabulary takes more than {MAX_VOCAB_BYTES} bytes")
                if end - at < length:
                    block, at = self.more(block, at, length, what)
                    end = len(block)
                kept.append(block[at : at + length].decode("utf-8", "replace"))
            elif end - at < length:
                self.skip(length - (end - at), what)
                block, at, end = b"", 0, 0
                continue
            at += length
        self.fh.seek(at - end, 1)  # give back what was read past the last string
        self.pos -= end - at
        return tuple(kept) if keep else None

    def more(self, block: bytes, at: int, need: int, what: str) -> tuple[bytes, int]:
        """The rest of ``block`` from ``at`` and the file's next bytes: at least ``need`` in
        all, a whole ``STRINGS_BLOCK`` where the file has it."""
        rest = block[at:]
        wanted = max(need - len(rest), min(STRINGS_BLOCK, self.size - self.pos))
        return rest + self.take(wanted, what), 0

    def tensor_info(self) -> TensorInfo:
        name = self.name("a tensor name")
        what = f"tensor {name!r}"
        n_dims = self.u32(what)
        if n_dims > MAX_DIMS:
            raise self.error(f"{what} has {n_dims} dimensions (at most {MAX_DIMS})")
        shape = struct.unpack(f"<{n_dims}Q", self.keep(8 * n_dims, what))
        ggml_type = self.u32(what)
        if ggml_type not in GGML_BLOCKS:
            raise self.error(f"{what} has ggml type {ggml_type}, unknown to this reader")
        return TensorInfo(name, shape, ggml_type, self.u64(what))
