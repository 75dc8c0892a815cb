"""``python -m workbench.mock_server``: serve until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from workbench.engine.base.server_kinds import LLAMACPP
from workbench.engine.measure.open_files import raise_open_files
from workbench.mock_server.generator import Timing
from workbench.mock_server.metrics_page import EXPOSITIONS
from workbench.mock_server.server import MockServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workbench.mock_server",
        description="A streaming OpenAI-compatible mock server with exact, known timing.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--itl-ms", type=float, default=20.0, help="gap between chunks")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per request")
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument(
        "--slots",
        type=int,
        default=256,
        help="what /props reports; with --queue, how many stream at once",
    )
    parser.add_argument(
        "--queue",
        action="store_true",
        help="a request that finds every slot busy waits for one, first come first served, "
        "counted as waiting on /metrics (without it, it streams at once beyond the slots)",
    )
    parser.add_argument("--close", action="store_true", help="no keep-alive")
    parser.add_argument(
        "--reasoning-tokens",
        type=int,
        default=0,
        help="of each chat answer's tokens, the first N are reasoning (reasoning_content, "
        "or reasoning as vLLM), streamed before the answer at the same ITL",
    )
    parser.add_argument(
        "--metrics",
        choices=sorted(EXPOSITIONS),
        default=LLAMACPP.key,
        help="the server whose /metrics names (and endpoints) to speak (llamacpp)",
    )
    args = parser.parse_args(argv)
    try:
        timing = Timing(
            args.ttft_ms,
            args.itl_ms,
            args.tokens,
            args.tokens_per_chunk,
            args.slots,
            not args.close,
            args.reasoning_tokens,
            args.queue,
        )
    except ValueError as exc:
        parser.error(str(exc))
    raise_open_files()
    asyncio.run(_serve(timing, args.host, args.port, args.metrics))
    return 0


async def _serve(timing: Timing, host: str, port: int, metrics: str) -> None:
    server = MockServer(timing, metrics)
    await server.start(host, port)
    print(f"listening on http://{host}:{server.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.close()


if __name__ == "__main__":
    sys.exit(main())
