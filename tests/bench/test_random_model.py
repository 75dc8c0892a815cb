"""bench/gpu/random_model.py: a template keeps a GGUF file's metadata and tensor list, and the
model built from it has the same, with valid random data (read back with the project's own
header reader, the one the planner uses)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

from workbench.engine.models.gguf_header import read_gguf_header

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu" / "random_model.py"
spec = importlib.util.spec_from_file_location("random_model", SCRIPT)
assert spec and spec.loader
random_model = importlib.util.module_from_spec(spec)
sys.modules["random_model"] = random_model
spec.loader.exec_module(random_model)

TOKENS = ("<|endoftext|>", "a", "b", "ab", "Ġthe", "é")


def write_source(path: Path) -> None:
    """A small llama-shaped GGUF with the kinds of tensors and metadata SmolLM2's Q4_1 has."""
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_block_count(1)
    writer.add_embedding_length(64)
    writer.add_rope_freq_base(10000.0)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(list(TOKENS))
    writer.add_token_types([1, 1, 1, 1, 1, 1])
    writer.add_token_merges(["a b", "Ġ t"])
    writer.add_add_bos_token(False)
    writer.add_chat_template("{{ messages }}")
    rng = np.random.default_rng(1)
    writer.add_tensor(
        "token_embd.weight",
        gguf.quants.quantize(
            rng.normal(size=(6, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0
        ),
        raw_dtype=gguf.GGMLQuantizationType.Q8_0,
    )
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(64, np.float32))
    writer.add_tensor(
        "blk.0.ffn_up.weight",
        gguf.quants.quantize(
            rng.normal(size=(128, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q4_1
        ),
        raw_dtype=gguf.GGMLQuantizationType.Q4_1,
    )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_built_model_has_the_templates_metadata_and_tensors(tmp_path: Path) -> None:
    source, template, built = tmp_path / "src.gguf", tmp_path / "t.json.gz", tmp_path / "out.gguf"
    write_source(source)
    assert random_model.main(["template", str(source), str(template)]) == 0
    assert template.stat().st_size < source.stat().st_size
    assert random_model.main(["build", str(template), str(built), "--seed", "3"]) == 0

    names = frozenset({"tokenizer.ggml.tokens", "tokenizer.ggml.merges"})
    want, got = read_gguf_header(source, names), read_gguf_header(built, names)
    assert got.fields == want.fields
    assert got.fields["tokenizer.ggml.tokens"] == TOKENS
    assert [(t.name, t.shape, t.ggml_type, t.n_bytes) for t in got.tensors] == [
        (t.name, t.shape, t.ggml_type, t.n_bytes) for t in want.tensors
    ]
    assert built.stat().st_size == source.stat().st_size

    # Random, not copied, and valid: finite values of a weight's size, norms near 1.
    reader = gguf.GGUFReader(built)
    values = {t.name: gguf.quants.dequantize(t.data, t.tensor_type) for t in reader.tensors}
    original = {t.name: np.array(t.data) for t in gguf.GGUFReader(source).tensors}
    for name, v in values.items():
        assert np.isfinite(v).all(), name
        assert not np.array_equal(
            np.array(reader.get_tensor([t.name for t in reader.tensors].index(name)).data),
            original[name],
        ), name
    assert np.abs(values["blk.0.attn_norm.weight"] - 1).max() < 0.2
    assert 0 < np.abs(values["blk.0.ffn_up.weight"]).max() < 0.05
    assert 0 < np.abs(values["token_embd.weight"]).max() < 0.05


def test_unsupported_type_and_wrong_file_are_one_line_errors(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"not gzip")
    assert random_model.main(["build", str(bad), str(tmp_path / "x.gguf")]) == 1
    assert capsys.readouterr().err.startswith("random_model: ")
    spec_ = random_model.TensorSpec("w", (256, 2), "Q4_K")
    with pytest.raises(ValueError, match="Q4_K is not supported"):
        random_model.random_data(spec_, np.random.default_rng(0))
