"""The frozen app's entry point: the ``workbench`` command, with what an app needs more.

- Started with no arguments (a double click, the Finder, a .desktop file), it opens the
  window, saving sessions under the user's documents: the folder it was started in may be
  ``/`` or the read-only app itself.
- ``workbench gui`` without ``--experiment`` loads the lab shipped inside the app when the
  default's relative path does not name a file here, as it does in a source checkout.
- A frozen program has no ``python -m``: the engine starts its watchdog as
  ``sys.executable -m workbench.engine.server.watchdog ...``, so ``-m`` runs a module of
  ours; and ``multiprocessing`` children (the window's engine process) start through
  ``freeze_support``.
"""

from __future__ import annotations

import multiprocessing
import runpy
import sys
from pathlib import Path

APP_DIR_NAME = "Concurrency Workbench"
OWN_MODULES = "workbench."


def app_argv(argv: list[str], bundle: Path, documents: Path) -> list[str]:
    """The arguments the CLI gets: ``argv`` with the app's defaults filled in."""
    from workbench.cli.run_commands import DEFAULT_EXPERIMENT

    if not argv:
        argv = ["gui", "--out", str(documents / APP_DIR_NAME / "results")]
    given = {arg.split("=", 1)[0] for arg in argv}
    if argv[0] == "gui" and "--experiment" not in given and not DEFAULT_EXPERIMENT.is_file():
        argv = [*argv, "--experiment", str(bundle / DEFAULT_EXPERIMENT)]
    return argv


def run_module(argv: list[str]) -> int:
    """``-m MODULE ARGS``, for this app's own modules only."""
    if len(argv) < 2 or not argv[1].startswith(OWN_MODULES):
        print(f"-m runs only the app's own modules ({OWN_MODULES}*)", file=sys.stderr)
        return 2
    sys.argv = [argv[1], *argv[2:]]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    return 0


def main() -> int:
    multiprocessing.freeze_support()  # a spawned child runs its target here, then exits
    argv = sys.argv[1:]
    if argv[:1] == ["-m"]:
        return run_module(argv)
    from platformdirs import user_documents_path

    from workbench.cli.main import main as workbench_main
    from workbench.engine.base.bundle import bundle_root

    bundle = bundle_root() or Path(__file__).resolve().parent.parent
    return workbench_main(app_argv(argv, bundle, user_documents_path()))


if __name__ == "__main__":
    sys.exit(main())
