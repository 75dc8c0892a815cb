"""Finding GGUF models where people keep them: a made home folder laid out as the Hugging Face
hub cache, llama.cpp's cache, LM Studio and Ollama lay theirs out, with real GGUF headers."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest

from tests.engine.models.made_models import written
from workbench.engine.models.model_finder import (
    MAX_DEPTH,
    MAX_MANIFEST_BYTES,
    FoundModel,
    Place,
    find_models,
    places,
)

DIGEST = "sha256:" + "ab" * 32


def write_gguf(path: Path, arch: str = "qwen2", file_type: int = 15, ctx: int = 32768) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(path.stem)
    writer.add_context_length(ctx)
    writer.add_file_type(file_type)
    writer.add_tensor("token_embd.weight", np.zeros((8, 8), dtype=np.float32))
    return written(writer, path)


def ollama_manifest(path: Path, digest: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    layers = [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "cd" * 32},
        {"mediaType": "application/vnd.ollama.image.model", "digest": digest, "size": 1},
    ]
    path.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    hub = home / ".cache" / "huggingface" / "hub" / "models--Qwen--Qwen2.5-0.5B-Instruct-GGUF"
    blob = write_gguf(hub / "blobs" / "0123abcd")
    snapshot = hub / "snapshots" / "9f8e" / "qwen2.5-0.5b-instruct-q4_k_m.gguf"
    snapshot.parent.mkdir(parents=True)
    snapshot.symlink_to(blob)
    write_gguf(
        home / ".cache" / "llama.cpp" / "ggml-org_gemma-3-1b-it-GGUF_gemma.gguf", "gemma3", 7
    )
    write_gguf(home / ".lmstudio" / "models" / "lmstudio-community" / "Phi" / "phi.gguf", "phi3", 2)
    broken = home / ".lmstudio" / "models" / "someone" / "broken.gguf"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"<html>not a model, a download error page</html>" * 4)
    deep = home / ".cache" / "llama.cpp" / Path(*["d"] * (MAX_DEPTH + 1)) / "too-deep.gguf"
    write_gguf(deep)
    ollama = home / ".ollama" / "models"
    write_gguf(ollama / "blobs" / DIGEST.replace(":", "-"), "llama", 15, 131072)
    manifests = ollama / "manifests" / "registry.ollama.ai"
    ollama_manifest(manifests / "library" / "llama3.2" / "1b", DIGEST)
    ollama_manifest(manifests / "someone" / "odd" / "latest", "sha256:../../../etc/passwd")
    huge = manifests / "library" / "huge" / "latest"
    huge.parent.mkdir(parents=True)
    huge.write_text(" " * (MAX_MANIFEST_BYTES + 1))
    return home


def found_in(home: Path) -> dict[str, FoundModel]:
    return {m.name: m for m in find_models(places(home, env={}), include_default=False)}


def test_each_place_is_found_and_described_from_its_header(home):
    found = found_in(home)
    hub = found["Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf"]
    assert (hub.source, hub.architecture, hub.quantisation, hub.training_context) == (
        "Hugging Face",
        "qwen2",
        "Q4_K_M",
        32768,
    )
    gemma = found["ggml-org_gemma-3-1b-it-GGUF_gemma.gguf"]
    assert (gemma.source, gemma.architecture, gemma.quantisation) == ("llama.cpp", "gemma3", "Q8_0")
    phi = found["lmstudio-community/Phi/phi.gguf"]
    assert (phi.source, phi.quantisation) == ("LM Studio", "Q4_0")
    llama = found["llama3.2:1b"]
    assert (llama.source, llama.training_context) == ("Ollama", 131072)
    assert llama.path.name == DIGEST.replace(":", "-")
    assert all(m.size_bytes > 0 for m in found.values())


def test_what_is_not_a_model_or_out_of_bounds_is_not_used(home):
    found = found_in(home)
    broken = found["someone/broken.gguf"]
    assert broken.error is not None and "is not a GGUF model file" in broken.error
    assert broken.architecture is None
    assert not any("too-deep" in name for name in found)  # deeper than the walk goes
    assert "someone/odd:latest" not in found  # a digest that is not one
    assert "huge:latest" not in found  # a manifest over its bound
    assert len([m for m in found.values() if m.error is None]) == 4


def test_the_environment_moves_the_places(tmp_path):
    env = {
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "LLAMA_CACHE": str(tmp_path / "llama"),
        "OLLAMA_MODELS": str(tmp_path / "ollama"),
    }
    folders = [p.folder for p in places(tmp_path / "home", env)]
    assert folders[0] == tmp_path / "hub"
    assert tmp_path / "llama" in folders and tmp_path / "ollama" in folders
    assert Place("Ollama", tmp_path / "home" / ".ollama" / "models") in places(
        tmp_path / "home", env
    )


def test_the_installed_default_model_comes_first(tmp_path):
    (first, *_) = find_models(places(tmp_path, env={}))
    assert first.source == "default (installed)" and first.architecture == "llama"
    assert (first.quantisation, first.training_context) == ("Q4_1", 8192)


def test_a_place_that_cannot_be_read_leaves_the_others(home, monkeypatch):
    """Python 3.11's Path.is_dir raises PermissionError where a folder cannot be entered."""
    real_is_dir = Path.is_dir

    def is_dir(self):
        if self.name == "manifests":
            raise PermissionError(13, "Permission denied", str(self))
        return real_is_dir(self)

    monkeypatch.setattr(Path, "is_dir", is_dir)
    found = found_in(home)
    assert "llama3.2:1b" not in found  # Ollama's manifests could not be read
    assert "lmstudio-community/Phi/phi.gguf" in found
