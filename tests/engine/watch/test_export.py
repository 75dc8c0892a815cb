"""A kept watch as a Perfetto trace: a track per slot, and the server's own track where it
did not answer."""

from __future__ import annotations

from workbench.engine.watch.export import trace_events
from workbench.engine.watch.record import SUFFIX, Recorder, read
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.watcher import Watched


def test_a_gap_is_a_server_down_slice_on_the_servers_track(tmp_path):
    path = tmp_path / f"w{SUFFIX}"
    recorder = Recorder(path, "http://127.0.0.1:8080", 0.1)
    watched = Watched(0, seconds=3.0)
    task = WatchedTask(0, 7, 0.1, 1.0, 0.5, 1.2, 100, 0, 20, decoded_all=True)
    watched.tasks.restore(task)
    recorder.task(task)
    for t_s, answered in ((1.2, False), (1.6, True), (2.5, False)):
        watched.answered(t_s, answered)
    recorder.close(watched)
    events = list(trace_events(read(path), path))
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names == {"slot 0", "server"}
    down = [(e["ts"], e["dur"], e["tid"]) for e in events if e.get("name") == "server down"]
    assert down == [(1_200_000, 400_000, 0), (2_500_000, 500_000, 0)]
    assert [e["name"] for e in events if e.get("tid") == 1 and e["ph"] == "X"] == [
        "prompt",
        "decode",
    ]
