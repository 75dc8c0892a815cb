"""SSEParser: events come out whole however the bytes are cut."""

from __future__ import annotations

import itertools

import pytest

from workbench.engine.net.sse import SSEError, SSEEvent, SSEParser


def parse_in_pieces(stream: bytes, cuts: list[int]) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    bounds = [0, *cuts, len(stream)]
    for a, b in itertools.pairwise(bounds):
        events += parser.feed(stream[a:b])
    return events + parser.close()


LLAMA_STREAM = (
    'data: {"choices":[{"delta":{"role":"assistant","content":null}}]}\n\n'
    'data: {"choices":[{"delta":{"content":"héllo"}}]}\n\n'
    ": keep-alive comment\n\n"
    'data: {"choices":[{"delta":{"content":" wörld €👍"}}]}\n\n'
    "event: message\n"
    'data: {"choices":[],"usage":{"completion_tokens":2}}\n\n'
    "data: [DONE]\n\n"
).encode()
LLAMA_EVENTS = [
    SSEEvent(None, '{"choices":[{"delta":{"role":"assistant","content":null}}]}'),
    SSEEvent(None, '{"choices":[{"delta":{"content":"héllo"}}]}'),
    SSEEvent(None, '{"choices":[{"delta":{"content":" wörld €👍"}}]}'),
    SSEEvent("message", '{"choices":[],"usage":{"completion_tokens":2}}'),
    SSEEvent(None, "[DONE]"),
]


def test_whole_stream_in_one_feed() -> None:
    parser = SSEParser()
    assert parser.feed(LLAMA_STREAM) == LLAMA_EVENTS
    assert parser.close() == []
    assert parser.pending == ""


@pytest.mark.parametrize(
    "newline",
    ["\n", "\r\n", "\r"],
    ids=["LF", "CRLF", "CR"],
)
def test_one_cut_at_every_byte_boundary(newline: str) -> None:
    stream = LLAMA_STREAM.decode().replace("\n", newline).encode()
    for cut in range(len(stream) + 1):
        assert parse_in_pieces(stream, [cut]) == LLAMA_EVENTS, f"cut at byte {cut}"


def test_one_byte_at_a_time() -> None:
    assert parse_in_pieces(LLAMA_STREAM, list(range(1, len(LLAMA_STREAM)))) == LLAMA_EVENTS


def test_events_come_out_as_soon_as_they_are_complete() -> None:
    parser = SSEParser()
    assert parser.feed(b'data: {"a": 1}\n') == []
    assert parser.pending == ""  # the line is whole; its event waits for the blank line
    assert parser.feed(b"\ndata: [DO") == [SSEEvent(None, '{"a": 1}')]
    assert parser.pending == "data: [DO"
    assert parser.feed(b"NE]\n\n") == [SSEEvent(None, "[DONE]")]


def test_a_line_or_an_event_past_its_bound_is_refused(monkeypatch) -> None:
    """A server must not make the client hold (and, before, re-scan) an endless line."""
    from workbench.engine.net import sse

    monkeypatch.setattr(sse, "MAX_LINE_CHARS", 1000)
    monkeypatch.setattr(sse, "MAX_EVENT_CHARS", 3000)
    parser = SSEParser()
    parser.feed(b"data: " + b"x" * 500)
    with pytest.raises(SSEError, match="a line longer than 1000 characters"):
        parser.feed(b"x" * 600)
    parser = SSEParser()
    with pytest.raises(SSEError, match="an event over 3000 characters"):
        parser.feed((b"data: " + b"y" * 900 + b"\n") * 4)


def test_split_utf8_is_not_replaced() -> None:
    data = 'data: "€ 👍 é"\n\n'.encode()
    for cut in range(len(data) + 1):
        parser = SSEParser()
        events = parser.feed(data[:cut]) + parser.feed(data[cut:]) + parser.close()
        assert events == [SSEEvent(None, '"€ 👍 é"')], f"cut at byte {cut}"


def test_invalid_utf8_is_replaced_not_raised() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\xffb\n\n") == [SSEEvent(None, "a\ufffdb")]


def test_multi_line_data_is_joined_with_newlines() -> None:
    parser = SSEParser()
    events = parser.feed(b"data: first\ndata:second\ndata:  third\n\n")
    # one optional space after the colon is removed, not more
    assert events == [SSEEvent(None, "first\nsecond\n third")]


def test_crlf_multi_line_event_cut_between_cr_and_lf() -> None:
    """A CRLF cut after its CR must not end the event early (an extra blank line)."""
    stream = b"event: message\r\ndata: a\r\ndata: b\r\n\r\n"
    expected = [SSEEvent("message", "a\nb")]
    for cut in range(len(stream) + 1):
        assert parse_in_pieces(stream, [cut]) == expected, f"cut at byte {cut}"


def test_comments_and_unknown_fields_are_ignored() -> None:
    parser = SSEParser()
    stream = b": ping\n\nid: 7\nretry: 100\n\n: note\ndata: x\nid: 8\n\n"
    assert parser.feed(stream) == [SSEEvent(None, "x")]


def test_error_field_becomes_an_error_event() -> None:
    parser = SSEParser()
    events = parser.feed(b'error: {"code": 500, "message": "boom"}\n\n')
    assert events == [SSEEvent("error", '{"code": 500, "message": "boom"}')]


def test_event_name_is_kept() -> None:
    parser = SSEParser()
    assert parser.feed(b"event: error\ndata: {}\n\n") == [SSEEvent("error", "{}")]


def test_close_flushes_a_trailing_event() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: 1\n\ndata: [DONE]") == [SSEEvent(None, "1")]
    assert parser.close() == [SSEEvent(None, "[DONE]")]
    assert parser.pending == ""


def test_close_flushes_an_event_ended_by_one_newline() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: last\n") == []
    assert parser.close() == [SSEEvent(None, "last")]


def test_close_flushes_a_dangling_partial_utf8_sequence() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: \xe2\x82") == []
    assert parser.close() == [SSEEvent(None, "\ufffd")]


def test_close_with_only_whitespace_or_comments_gives_nothing() -> None:
    parser = SSEParser()
    assert parser.feed(b"\n\n\n") == []
    assert parser.close() == []
    parser = SSEParser()
    assert parser.feed(b": just a comment") == []
    assert parser.close() == []


def test_cr_then_lf_then_lf_in_separate_reads_ends_the_event() -> None:
    """After a CRLF split across reads, the next LF is a line end of its own (the blank
    line), not a second half to drop: the two events stay apart."""
    parser = SSEParser()
    events = []
    for piece in (b"data: a\r", b"\n", b"\n", b"data: b\n\n"):
        events += parser.feed(piece)
    assert events == [SSEEvent(None, "a"), SSEEvent(None, "b")]


def test_a_byte_order_mark_opens_no_field() -> None:
    assert SSEParser().feed("\ufeffdata: x\n\n".encode()) == [SSEEvent(None, "x")]
