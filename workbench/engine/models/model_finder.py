"""GGUF models where people already keep them, described from their own headers.

Places looked in: the Hugging Face hub cache (``$HF_HUB_CACHE``, ``$HF_HOME/hub``,
``~/.cache/huggingface/hub``), llama.cpp's download cache (``$LLAMA_CACHE``,
``~/.cache/llama.cpp``, ``~/Library/Caches/llama.cpp``), LM Studio's models folders
(``~/.lmstudio/models``, ``~/.cache/lm-studio/models``), Ollama's blobs through its manifests
(``$OLLAMA_MODELS``, ``~/.ollama/models``), and the default model this project installs.

Folders and manifests are the user's, but their contents are not trusted: the walk is bounded
in depth, entries and files found, a manifest is read only up to ``MAX_MANIFEST_BYTES`` and must
be the JSON Ollama writes, and a file is listed only if its header reads as GGUF.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from workbench.engine.base.errors import ModelFileError, WorkbenchError
from workbench.engine.models.gguf_header import FILE_TYPES, read_gguf_header
from workbench.engine.models.model_file import default_model_path

MAX_DEPTH = 6  # hub/models--org--name/snapshots/rev/sub/file.gguf
MAX_ENTRIES = 20_000  # directory entries looked at, per place
MAX_MODELS = 500  # files listed, in all
MAX_MANIFEST_BYTES = 256 * 1024
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"


@dataclass(frozen=True)
class Place:
    """Where models may be: a folder, and which program keeps models there."""

    source: str
    folder: Path


@dataclass(frozen=True)
class FoundModel:
    """A GGUF file and what its header says about it (None where it says nothing)."""

    path: Path
    name: str
    source: str
    size_bytes: int
    architecture: str | None = None
    quantisation: str | None = None
    training_context: int | None = None
    error: str | None = None  # the header did not read: listed, but not usable

    @property
    def size_text(self) -> str:
        for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
            if self.size_bytes >= scale:
                return f"{self.size_bytes / scale:.{2 if unit == 'GiB' else 0}f} {unit}"
        return f"{self.size_bytes / 1024:.0f} KiB"


def places(home: Path | None = None, env: dict[str, str] | None = None) -> list[Place]:
    """The folders to look in, in the order they are listed (the first place that holds a
    file names it)."""
    home = home or Path.home()
    env = dict(os.environ) if env is None else env
    hub = [Path(env["HF_HUB_CACHE"])] if env.get("HF_HUB_CACHE") else []
    if env.get("HF_HOME"):
        hub.append(Path(env["HF_HOME"]) / "hub")
    hub.append(home / ".cache" / "huggingface" / "hub")
    llama = [Path(env["LLAMA_CACHE"])] if env.get("LLAMA_CACHE") else []
    llama.append(home / ".cache" / "llama.cpp")
    if sys.platform == "darwin":
        llama.append(home / "Library" / "Caches" / "llama.cpp")
    lm_studio = [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]
    ollama = [Path(env["OLLAMA_MODELS"])] if env.get("OLLAMA_MODELS") else []
    ollama.append(home / ".ollama" / "models")
    return [
        *(Place("Hugging Face", f) for f in hub),
        *(Place("llama.cpp", f) for f in llama),
        *(Place("LM Studio", f) for f in lm_studio),
        *(Place("Ollama", f) for f in ollama),
    ]


def find_models(where: list[Place] | None = None, include_default: bool = True) -> list[FoundModel]:
    """Every GGUF model in ``where`` (``places()`` by default), each file once, described
    from its header; the default model first when it is installed."""
    found: dict[Path, FoundModel] = {}
    if include_default:
        with contextlib.suppress(WorkbenchError):
            path = default_model_path()
            found[path.resolve()] = describe(path, "default (installed)", "default")
    for place in places() if where is None else where:
        candidates = (
            ollama_models(place.folder) if place.source == "Ollama" else gguf_files(place.folder)
        )
        try:
            for name, path in candidates:
                key = path.resolve()
                if key not in found and len(found) < MAX_MODELS:
                    found[key] = describe(path, place.source, name)
        except (OSError, RuntimeError):  # a folder we may not read, a symlink loop
            continue  # the other places still count
    return list(found.values())


def gguf_files(folder: Path) -> Iterator[tuple[str, Path]]:
    """(display name, path) of the ``.gguf`` files under ``folder``, breadth first, within
    the walk's bounds. A Hugging Face snapshot is named by its repository
    (``org/name/file.gguf``); other files by their path under ``folder``."""
    if not folder.is_dir():
        return
    seen = 0
    queue = [(folder, 0)]
    while queue:
        current, depth = queue.pop(0)
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > MAX_ENTRIES:
                return
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False) and depth < MAX_DEPTH:
                    if entry.name != "blobs":  # hub blobs are the snapshots' targets
                        queue.append((Path(entry.path), depth + 1))
                elif entry.name.lower().endswith(".gguf") and entry.is_file():
                    yield _display_name(folder, Path(entry.path)), Path(entry.path)


def _display_name(folder: Path, path: Path) -> str:
    parts = path.relative_to(folder).parts
    if parts and parts[0].startswith("models--") and "snapshots" in parts:
        repo = parts[0].removeprefix("models--").replace("--", "/")
        return f"{repo}/{'/'.join(parts[parts.index('snapshots') + 2 :])}"
    return "/".join(parts)


def ollama_models(folder: Path) -> Iterator[tuple[str, Path]]:
    """(name:tag, blob path) of each model Ollama's manifests name: the manifest's layer of
    the model media type points at a blob ``blobs/sha256-<hex>``."""
    manifests = folder / "manifests"
    for name, manifest in _manifests(manifests):
        digest = _model_digest(manifest)
        if digest is None:
            continue
        blob = folder / "blobs" / digest.replace(":", "-")
        if blob.is_file():
            yield name, blob


def _manifests(manifests: Path) -> Iterator[tuple[str, Path]]:
    """(display name, file) of each manifest under ``registry/namespace/model/tag``."""
    if not manifests.is_dir():
        return
    seen = 0
    for host in _dirs(manifests):
        for namespace in _dirs(host):
            for model in _dirs(namespace):
                for tag in sorted(model.iterdir()) if model.is_dir() else []:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        return
                    if tag.is_file():
                        prefix = "" if namespace.name == "library" else f"{namespace.name}/"
                        yield f"{prefix}{model.name}:{tag.name}", tag


def _dirs(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


def _model_digest(manifest: Path) -> str | None:
    """The digest of the manifest's model layer, if it is a well-formed one."""
    try:
        with manifest.open("rb") as fh:
            raw = fh.read(MAX_MANIFEST_BYTES + 1)
        if len(raw) > MAX_MANIFEST_BYTES:
            return None
        document = json.loads(raw)
    except (OSError, ValueError):
        return None
    layers = document.get("layers") if isinstance(document, dict) else None
    for layer in layers if isinstance(layers, list) else []:
        if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL_LAYER:
            digest = layer.get("digest")
            if isinstance(digest, str) and digest.startswith("sha256:"):
                hex_part = digest.removeprefix("sha256:")
                if len(hex_part) == 64 and all(c in "0123456789abcdef" for c in hex_part):
                    return digest
    return None


def describe(path: Path, source: str, name: str) -> FoundModel:
    """What the file's header says: architecture, quantisation, training context."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    try:
        fields = read_gguf_header(path).fields
    except ModelFileError as exc:
        return FoundModel(path, name, source, size, error=str(exc))
    arch = fields.get("general.architecture")
    arch = arch if isinstance(arch, str) else None
    file_type = fields.get("general.file_type")
    quant = FILE_TYPES.get(file_type) if isinstance(file_type, int) else None
    context = fields.get(f"{arch}.context_length") if arch else None
    return FoundModel(
        path,
        name,
        source,
        size,
        architecture=arch,
        quantisation=quant or (f"type {file_type}" if isinstance(file_type, int) else None),
        training_context=context if isinstance(context, int) else None,
    )
