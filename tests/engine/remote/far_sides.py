"""Far sides for the near side's tests, each a process the near side starts as it would an
agent (``python far_sides.py MODE ... agent``):

- ``junk``: answers its first line with a line that is no JSON.
- ``old``: says hello with another protocol and version.
- ``evil-error``: answers check with an error that would drive a terminal.
- ``huge-clock``: answers pings with a clock no ``perf_counter_ns`` reads.
- ``ahead``: a far clock 1,000 s ahead of this one, whose run's session began 5 s ago.
- ``bad-file``: answers fetch with bytes whose sha256 is not the one it announced.
- ``stall`` / ``junk-mid-run``: a well-behaved agent until its run's session is sent, then
  silence forever (reading on), or a line of garbage.
- ``relay CMD...``: carries the channel to a real agent (``CMD... agent``), as ssh does: a
  test kills it to drop the channel.
- ``limited BYTES CMD...``: runs the agent with files limited to BYTES (RLIMIT_FSIZE): its
  session cannot grow, as on a full disk.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import replace

from workbench.engine.base.records import Hardware
from workbench.engine.remote import wire
from workbench.engine.remote.protocol import PROTOCOL, HostFacts, SessionHeader

FACTS = HostFacts(
    "fake", "0.1.0", PROTOCOL, "Fake 1", "/bin/fake", "PATH", None, None, (), None, None, ()
)
HEADER = SessionHeader(
    "fake", "", None, "managed", None, Hardware(), 0, "2026-01-01T00:00:00+00:00"
)


def send(kind: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"kind": kind, **fields}) + "\n")
    sys.stdout.flush()


AHEAD_NS = 1000 * 10**9
BEGAN_S = 5.0


def fake(mode: str) -> None:
    ahead = AHEAD_NS if mode == "ahead" else 0
    for line in sys.stdin:
        op = json.loads(line)
        if mode == "junk":
            print("this is not the protocol", flush=True)
        elif op["op"] == "hello":
            protocol = PROTOCOL + 1 if mode == "old" else PROTOCOL
            send("hello", protocol=protocol, version="9.9.9", hostname="fake")
        elif op["op"] == "check" and mode == "evil-error":
            send("error", text="\x1b]0;owned\x07\x1b[2Jno model here")
        elif op["op"] == "check":
            send("facts", facts=wire.plain(FACTS))
        elif op["op"] == "ping" and op.get("seq", -1) >= 0:
            far = 10**30 if mode == "huge-clock" else time.perf_counter_ns() + ahead
            send("pong", seq=op["seq"], t_ns=far)
        elif op["op"] == "fetch":  # ``bad-file``: a file whose bytes are not the ones announced
            send("file", run_id=op["run_id"], size=3, sha256="0" * 64)
            send("chunk", data="AAAA")
            send("file_end")
        elif op["op"] == "run":
            began = time.perf_counter_ns() + ahead - round(BEGAN_S * 1e9)
            header = replace(HEADER, clock_origin_ns=began) if ahead else HEADER
            send("session", run_id="a" * 32, header=wire.plain(header))
            if mode == "junk-mid-run":
                print("\x1b[2Jrm -rf /", flush=True)
    if mode in ("stall", "junk-mid-run", "ahead"):
        time.sleep(60)  # never a word more, nor an end


def relay(command: list[str]) -> None:
    agent = subprocess.Popen([*command, "agent"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert agent.stdin is not None and agent.stdout is not None

    def down() -> None:
        while data := os.read(0, 65536):
            agent.stdin.write(data)
            agent.stdin.flush()
        agent.stdin.close()

    threading.Thread(target=down, daemon=True).start()
    while data := agent.stdout.read1(65536):
        os.write(1, data)
    agent.wait()


def limited(limit: int, command: list[str]) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    os.execvp(command[0], [*command, "agent"])


if __name__ == "__main__":
    words = sys.argv[1:-1]  # the last is "agent", as the near side starts one
    if words[0] == "relay":
        relay(words[1:])
    elif words[0] == "limited":
        limited(int(words[1]), words[2:])
    else:
        fake(words[0])
