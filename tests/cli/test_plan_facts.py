"""``workbench plan --facts-from SESSION``: a server's startup facts on this machine say what
its GPU may hold; on Metal, the plan is held to the working set."""

from __future__ import annotations

from dataclasses import replace

from tests.made_sessions import Config, build_session, burst, startup_facts
from workbench.cli.main import main
from workbench.engine.models.model_file import default_model_path

ON_METAL = replace(
    startup_facts(1, 4096),
    backend="Metal",
    layers_offloaded=31,
    layers_total=31,
    metal_working_set_bytes=2**30,  # 1 GiB: less than any machine's free RAM here
)


def test_a_metal_session_holds_the_plan_to_its_working_set(tmp_path, capsys):
    session = build_session(
        tmp_path / "metal.session.sqlite",
        "[server]\nslots = 1\n[workload]\nrequests = 2\n",
        [Config(burst(0, 2, slots=1, at_s=0.0), ON_METAL)],
    )
    model = str(default_model_path())
    args = ["plan", model, "--ctx", "4096", "--slots", "1", "--memory-gib", "64"]
    assert main([*args, "--facts-from", str(session)]) == 0
    said = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "memory to plan for: 1.0 GiB (Metal's working set)" in said
    assert main(args) == 0  # without the facts, the memory given
    assert "memory to plan for: 64.0 GiB (given)" in " ".join(capsys.readouterr().out.split())


def test_a_session_without_facts_is_a_clear_error(tmp_path, capsys):
    session = build_session(
        tmp_path / "none.session.sqlite",
        "[server]\nslots = 1\n[workload]\nrequests = 2\n",
        [Config([], None, status="failed", error="did not start")],
    )
    assert main(["plan", str(default_model_path()), "--facts-from", str(session)]) == 1
    assert "no configuration's server got ready" in capsys.readouterr().err
