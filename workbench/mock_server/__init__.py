"""A mock OpenAI-compatible streaming server whose timing is known, for checking the client.

A benchmark client's numbers can only be trusted if it recovers a latency it was not told.
This server streams every request on a fixed schedule: the first chunk ``ttft_ms`` after the
request arrived, then one chunk every ``itl_ms`` (each carrying ``tokens_per_chunk`` tokens; a
chat answer's first ``reasoning_tokens`` as reasoning, apart from the answer), and logs when
it actually wrote each chunk (``GET /mock/log``, on ``perf_counter_ns``, the clock the
workbench timestamps with on Linux and macOS): a benchmark can then tell the server's own
lateness from the client's error.

By default every request streams at once, however many there are. With ``--queue`` a request
that finds all ``--slots`` busy waits for one, first come first served, counted as waiting
on ``/metrics``, and its schedule starts when it takes the slot (``/mock/log`` says when): a
queue whose every wait is known, for checking what a watch makes of one.

It speaks HTTP/1.1 with keep-alive (``--close`` answers ``Connection: close`` instead) and
serves ``/health``, ``/v1/models`` and ``/metrics`` as the server ``--metrics`` names does
(llama.cpp by default, vLLM or SGLang): the catalogue's names, with that server's labels and
HELP lines, and values from what the mock is doing. As llama.cpp it also serves ``/props``
and ``/slots`` and ends each stream with ``usage`` and ``timings``; as vLLM or SGLang those
paths are 404 and a stream ends with ``usage`` only, as theirs do. Run it in its own process
(``python -m workbench.mock_server --port 0``, or ``MockProcess``): in the measuring process
it would share the interpreter with the client it checks.

Its parts: ``framing`` (HTTP heads, chunked encoding and SSE events, shared with the test
suite's fault-injecting fake), ``generator`` (the schedule and the token chunks),
``metrics_page`` (each kind's /metrics), ``server`` (connections and routes), ``process`` and
``__main__``. Nothing of the workbench imports it.
"""

from workbench.mock_server.generator import Timing
from workbench.mock_server.metrics_page import EXPOSITIONS
from workbench.mock_server.process import MockProcess
from workbench.mock_server.server import MockServer

__all__ = ["EXPOSITIONS", "MockProcess", "MockServer", "Timing"]
