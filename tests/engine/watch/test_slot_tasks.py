"""Tasks from polls of /slots, by the rules measured on the real server (the polls below are
one measured sequence, b11434, -np 2 -b 512: a 1,500-token prompt and 20 tokens, then two
8-token prompts with 2 tokens each)."""

from __future__ import annotations

from workbench.engine.watch.slot_tasks import KEPT, SlotTasks


def slot(
    number: int,
    task: int | None,
    busy: bool,
    sequence: int | None = None,
    processed: int | None = None,
    decoded: int | None = None,
    cached: int = 0,
) -> dict:
    return {
        "id": number,
        "id_task": task,
        "is_processing": busy,
        "n_prompt_tokens": sequence,
        "n_prompt_tokens_processed": processed,
        "n_prompt_tokens_cache": cached if task is not None else None,
        "n_decoded": decoded,
    }


IDLE = slot(0, None, False)
MEASURED = [
    (0.0, [IDLE, slot(1, None, False)]),
    (0.311, [IDLE, slot(1, 6, True, 512, 0, 0)]),
    (1.517, [IDLE, slot(1, 6, True, 1024, 512, 0)]),
    (2.868, [IDLE, slot(1, 6, True, 1500, 1024, 0)]),
    (4.379, [IDLE, slot(1, 6, True, 1505, 1500, 5)]),
    (4.482, [IDLE, slot(1, 6, True, 1516, 1500, 16)]),
    (4.533, [IDLE, slot(1, 6, False, 1519, 0, 0)]),
    (4.846, [slot(0, 116, True, 9, 8, 1), slot(1, 6, False, 1519, 0, 0)]),
    (4.897, [slot(0, 116, False, 9, 0, 0), slot(1, 6, False, 1519, 0, 0)]),
    (5.5, [slot(0, 116, False, 9, 0, 0), slot(1, 125, False, 9, 0, 0)]),
]


def test_a_task_is_seen_on_its_prompt_then_decoding_then_gone():
    tasks = SlotTasks()
    ended = [t for at, slots in MEASURED for t in tasks.observe(at, slots)]
    long, short, _ = ended
    assert (long.slot, long.task, long.seen_s, long.decoding_s, long.gone_s) == (
        1,
        6,
        0.311,
        4.379,
        4.533,
    )
    # its prompt is what was processed and cached once it decoded, not n_prompt_tokens
    # the last poll showed 16 decoded; the idle slot kept 1,519 = 1,500 + 20 - 1
    assert (long.prompt_tokens, long.cached_tokens, long.decoded) == (1500, 0, 20)
    assert long.decoded_all
    assert (short.slot, short.task, short.prompt_tokens, short.decoded) == (0, 116, 8, 2)
    assert short.seen_s == short.decoding_s == 4.846 and short.gone_s == 4.897
    assert not long.running_at_start and not long.missed


def test_a_task_never_seen_decoding_has_at_least_the_prompt_its_last_poll_showed():
    """Gone while its slot went straight on to the next task: its prompt as far as the
    chunk the last poll saw (with its cached part), and nothing read of its answer."""
    tasks = SlotTasks()
    tasks.observe(0.0, [slot(0, None, False)])
    tasks.observe(0.1, [slot(0, 7, True, 512, 0, 0, cached=24)])
    tasks.observe(0.2, [slot(0, 7, True, 1024, 512, 0, cached=24)])
    (gone,) = tasks.observe(0.3, [slot(0, 8, True, 300, 0, 0)])
    assert (gone.prompt_tokens, gone.cached_tokens, gone.decoding_s) == (1024, 24, None)
    assert gone.decoded == 0 and not gone.decoded_all
    # ended on its idle slot without a decoding poll: its answer is not read from the
    # slot (its prompt may be a chunk short of whole)
    (idle,) = tasks.observe(0.4, [slot(0, 8, False, 320, 0, 0)])
    assert idle.prompt_tokens == 300 and idle.decoded == 0 and not idle.decoded_all


def test_a_task_that_ran_between_two_polls_is_counted_by_the_id_it_left():
    tasks = SlotTasks()
    for at, slots in MEASURED:
        tasks.observe(at, slots)
    missed = tasks.recent[-1]
    assert (tasks.ended, tasks.missed, tasks.running) == (3, 1, 0)
    assert (missed.slot, missed.task, missed.missed) == (1, 125, True)
    assert (missed.seen_s, missed.gone_s, missed.sequence_tokens) == (4.897, 5.5, 9)
    assert missed.prompt_tokens is None and missed.decoding_s is None


def test_a_task_running_at_the_first_poll_is_said_to_be_and_one_still_running_is_open():
    tasks = SlotTasks()
    tasks.observe(0.0, [slot(0, 40, True, 600, 512, 0)])
    tasks.observe(0.1, [slot(0, 40, True, 700, 600, 12)])
    (running,) = tasks.tasks
    assert running.running_at_start and running.gone_s is None
    assert running.decoding_s == 0.1 and running.prompt_tokens == 600


def test_a_slot_that_goes_to_another_task_between_polls_ends_the_one_before():
    tasks = SlotTasks()
    tasks.observe(0.0, [slot(0, 3, True, 100, 100, 4)])
    (ended,) = tasks.observe(0.1, [slot(0, 9, True, 50, 0, 0)])
    assert (ended.task, ended.gone_s) == (3, 0.1)
    assert ended.decoded == 4 and not ended.decoded_all  # its last tokens left no trace
    assert [t.task for t in tasks.tasks] == [3, 9]


def test_a_slot_without_an_id_is_passed_over():
    tasks = SlotTasks()
    assert tasks.observe(0.0, [{"id": None, "id_task": 1, "is_processing": True}]) == []
    assert tasks.tasks == []


def test_a_long_watch_counts_every_task_and_keeps_the_recent_ones():
    tasks = SlotTasks()
    for n in range(2 * KEPT + 5):  # a task a poll on one slot, each seen once, then idle
        tasks.observe(2 * n, [slot(0, n, True, 10, 8, 2)])
        tasks.observe(2 * n + 1, [slot(0, n, False, 9, 0, 0)])
    assert tasks.ended == 2 * KEPT + 5 and len(tasks.recent) == KEPT
    assert tasks.recent[-1].task == 2 * KEPT + 4


def test_the_tasks_that_began_in_the_watch_leave_out_those_it_found_running():
    """What the queue let through while the watch looked: the tasks that took a slot in it,
    ended or still running, not one running at its first poll or found again after the
    server stopped answering."""
    tasks = SlotTasks()
    tasks.observe(0.0, [slot(0, 40, True, 600, 512, 0), slot(1, None, False)])
    tasks.observe(0.1, [slot(0, 40, False, 700, 0, 0), slot(1, 43, True, 9, 8, 1)])
    tasks.observe(0.2, [slot(0, 46, True, 9, 8, 1), slot(1, 43, False, 10, 0, 0)])
    assert (tasks.ended, tasks.running, tasks.began) == (2, 1, 2)
    tasks.gap(0.3)
    tasks.observe(0.6, [slot(0, 3, True, 9, 8, 1), slot(1, None, False)])  # restarted
    assert (tasks.ended, tasks.running, tasks.began) == (3, 1, 2)
