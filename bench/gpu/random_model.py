"""A GGUF model with a real model's shapes, types and tokenizer but random weights.

A GPU machine that can receive only a few tens of MiB cannot take the 98 MB default model
beside the llama.cpp source. Timings depend on the tensors' shapes and types, not on their
values (with `ignore_eos`, every request generates exactly its tokens), so a model made there
from a small template times like the real one:

    random_model.py template SRC.gguf OUT.json.gz   here: metadata and tensor list, no data
    random_model.py build TEMPLATE OUT.gguf [--seed N]   there: the same file, random data

Needs the `gguf` package (gguf-py: the llama.cpp source has a copy) and numpy.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "workbench-gguf-template/1"
MAX_TEMPLATE_BYTES = 64 * 2**20  # uncompressed JSON; SmolLM2's is about 2 MiB
MAX_TENSORS = 100_000


@dataclass(frozen=True)
class TensorSpec:
    """One tensor: its name, its shape in GGUF order (ne0 first), its GGML type's name."""

    name: str
    shape: tuple[int, ...]
    type: str


@dataclass(frozen=True)
class Template:
    """Every metadata key/value (with its GGUF value type) and every tensor, in file order."""

    kv: list[tuple[str, str, str | None, Any]]
    tensors: list[TensorSpec]


def _plain(value: Any) -> Any:
    """A reader value as JSON: bytes as text, numpy scalars as Python numbers."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="surrogateescape")
    if isinstance(value, np.generic):
        return value.item()
    return value


def read_template(source: Path) -> Template:
    """The template of a GGUF file: all of its metadata, its tensors' names, shapes and types."""
    import gguf

    reader = gguf.GGUFReader(source)
    kv: list[tuple[str, str, str | None, Any]] = []
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):  # the header's own counts, written again by the writer
            continue
        vtype = gguf.GGUFValueType(field.types[0])
        sub = gguf.GGUFValueType(field.types[1]).name if vtype == gguf.GGUFValueType.ARRAY else None
        kv.append((key, vtype.name, sub, _plain(field.contents())))
    tensors = [
        TensorSpec(t.name, tuple(int(n) for n in t.shape), t.tensor_type.name)
        for t in reader.tensors
    ]
    return Template(kv, tensors)


def save_template(template: Template, out: Path) -> None:
    document = {
        "format": FORMAT,
        "kv": [list(item) for item in template.kv],
        "tensors": [[t.name, list(t.shape), t.type] for t in template.tensors],
    }
    with gzip.open(out, "wt", encoding="utf-8", errors="surrogateescape") as f:
        json.dump(document, f, ensure_ascii=False)


def load_template(path: Path) -> Template:
    """A template file, bounded: a wrong or oversized file is a one-line error."""
    with gzip.open(path, "rb") as f:
        raw = f.read(MAX_TEMPLATE_BYTES + 1)
    if len(raw) > MAX_TEMPLATE_BYTES:
        raise ValueError(f"{path}: template larger than {MAX_TEMPLATE_BYTES} bytes")
    document = json.loads(raw.decode("utf-8", errors="surrogateescape"))
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} file")
    tensors = document["tensors"]
    if len(tensors) > MAX_TENSORS:
        raise ValueError(f"{path}: more than {MAX_TENSORS} tensors")
    return Template(
        [(k, t, s, v) for k, t, s, v in document["kv"]],
        [TensorSpec(str(n), tuple(int(d) for d in shape), str(t)) for n, shape, t in tensors],
    )


def _blocks(
    rng: np.random.Generator, n_blocks: int, header: np.ndarray, q_bytes: int
) -> np.ndarray:
    """Quantized blocks: the same small f16 header (scale, min) in each, random quants after."""
    head = np.broadcast_to(header.view(np.uint8), (n_blocks, header.nbytes))
    quants = rng.integers(0, 256, size=(n_blocks, q_bytes), dtype=np.uint8)
    return np.concatenate([head, quants], axis=1)


def random_data(spec: TensorSpec, rng: np.random.Generator) -> np.ndarray:
    """Valid random data for one tensor: norms near 1, weights small, quant scales finite."""
    import gguf

    qtype = gguf.GGMLQuantizationType[spec.type]
    shape = tuple(reversed(spec.shape))  # numpy order: rows first
    n = int(np.prod(shape))
    if qtype in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
        base = 1.0 if "norm" in spec.name else 0.0
        values = base + rng.normal(0.0, 0.02, size=shape)
        return values.astype(np.float32 if qtype == gguf.GGMLQuantizationType.F32 else np.float16)
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    if n % block:
        raise ValueError(f"{spec.name}: {n} elements is not a whole number of {spec.type} blocks")
    headers = {  # f16 scale (and min): the values land within about ±0.025
        gguf.GGMLQuantizationType.Q4_0: np.array([0.003], np.float16),
        gguf.GGMLQuantizationType.Q4_1: np.array([0.003, -0.0225], np.float16),
        gguf.GGMLQuantizationType.Q5_0: np.array([0.0015], np.float16),
        gguf.GGMLQuantizationType.Q5_1: np.array([0.0015, -0.0225], np.float16),
        gguf.GGMLQuantizationType.Q8_0: np.array([0.0002], np.float16),
    }
    if qtype not in headers:
        raise ValueError(
            f"{spec.name}: type {spec.type} is not supported (only F32, F16, "
            "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)"
        )
    header = headers[qtype]
    data = _blocks(rng, n // block, header, size - header.nbytes)
    return data.reshape(*shape[:-1], shape[-1] // block * size)


def build(template: Template, out: Path, seed: int = 0) -> None:
    """Writes a GGUF file with the template's metadata and tensors, random data of their types."""
    import gguf

    arch = next((v for k, _, _, v in template.kv if k == "general.architecture"), None)
    if not isinstance(arch, str):
        raise ValueError("template has no general.architecture")
    writer = gguf.GGUFWriter(out, arch)
    for key, vtype, sub, value in template.kv:
        if key == "general.architecture":  # the writer adds it itself
            continue
        writer.add_key_value(
            key,
            value,
            gguf.GGUFValueType[vtype],
            sub_type=gguf.GGUFValueType[sub] if sub else None,
        )
    rng = np.random.default_rng(seed)
    for spec in template.tensors:
        data = random_data(spec, rng)
        qtype = gguf.GGMLQuantizationType[spec.type]
        writer.add_tensor(spec.name, data, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    t = sub.add_parser("template", help="SRC.gguf -> template (metadata and tensor list)")
    t.add_argument("source", type=Path)
    t.add_argument("out", type=Path)
    b = sub.add_parser("build", help="template -> GGUF with random data")
    b.add_argument("template", type=Path)
    b.add_argument("out", type=Path)
    b.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        if args.mode == "template":
            save_template(read_template(args.source), args.out)
        else:
            build(load_template(args.template), args.out, args.seed)
    except (OSError, ValueError, KeyError) as exc:
        print(f"random_model: {exc}", file=sys.stderr)
        return 1
    print(f"random_model: wrote {args.out} ({args.out.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
