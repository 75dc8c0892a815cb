"""The server panel's llama-server, started by hand with the experiment's first settings to
poke at it outside an experiment, and stopped by hand or when the window closes."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.models.model_file import resolve_model
from workbench.engine.server.discovery import find_server_binary
from workbench.engine.server.llama_server import LlamaServer
from workbench.ui.controllers.tasks import Tasks


class ServerController(QObject):
    changed = Signal(bool)  # a hand-started server exists (starting or up), or none does
    # The server's state and detail. Emitted from whichever thread the server reports on
    # (stopping runs in a worker): Qt queues it to the receiver's thread.
    state = Signal(str, str)
    ready = Signal(str, object, str)  # base URL, start-up facts (StartupFacts), log path
    banner = Signal(str, str)  # text, kind (info, ok, error)

    def __init__(
        self,
        tasks: Tasks,
        out_dir: Path,
        server_bin: str | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.out_dir = out_dir
        self.server_bin = server_bin
        self.server: LlamaServer | None = None

    def start(self, settings: ServerSettings) -> None:
        self.tasks.spawn(self._start(settings))

    def stop(self) -> None:
        self.tasks.spawn(self._stop())

    def shutdown(self) -> None:
        """Stop the server now (the window is closing: no loop may be left to wait on)."""
        if self.server is not None:
            self.server.stop()
            self.server = None

    async def _start(self, settings: ServerSettings) -> None:
        try:
            binary = await asyncio.to_thread(lambda: find_server_binary(self.server_bin).path)
            model = await asyncio.to_thread(resolve_model, settings.model)
        except WorkbenchError as exc:
            self.banner.emit(str(exc), "error")
            return
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        server = LlamaServer(
            binary,
            model,
            settings,
            self.out_dir / "logs" / f"manual-{stamp}.log",
            on_state=self.state.emit,
        )
        self.server = server
        self.changed.emit(True)
        try:
            await server.start()
        except WorkbenchError as exc:
            self.server = None
            self.changed.emit(False)
            self.banner.emit(str(exc), "error")
            return
        self.ready.emit(server.base_url, server.facts, str(server.log_path))
        self.banner.emit(f"Server running at {server.base_url} (started by hand).", "ok")

    async def _stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            await asyncio.to_thread(server.stop)
        self.changed.emit(False)
