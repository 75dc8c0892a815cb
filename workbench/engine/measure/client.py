"""Streaming one request and recording exactly what arrived, and when.

Timestamps are ``perf_counter_ns`` taken where the bytes come off the connection. Errors are
stored on the record, never raised: one failed request must not end a run.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, PlainValidator
from typing_extensions import TypeAliasType

from workbench.engine.base.escaping import printable
from workbench.engine.base.records import CANCELLED, CONTEXT_FULL, RequestRecord, TokenChunk
from workbench.engine.base.validation import MAX_NUMBER, MAX_TEXT, adapter, as_text
from workbench.engine.config.experiment import WorkloadSettings
from workbench.engine.events import FirstToken, RequestSubmitted, TokenChunkArrived
from workbench.engine.net.http_stream import (
    ConnectFailed,
    HttpStreamError,
    StreamClient,
    StreamedResponse,
)
from workbench.engine.net.sse import SSEError, SSEParser

Emit = Callable[[Any], None]
ERROR_BODY_LIMIT = 2000
MAX_STREAM_BYTES = 64 * 2**20


def max_chunks(workload: WorkloadSettings) -> int:
    """Token chunks one response may carry: generous (a chunk per token, several times over,
    for tokenizers that split text oddly), but an endless stream stops here."""
    return 4 * workload.max_tokens + 64


Message = dict[str, str]  # one chat message: its role and content
MAX_KEYS = 64  # figures in one of a server's tables: llama-server sends a dozen


def _text(limit: int) -> Any:
    """Text within ``limit`` as it came; any other value as its text, cut to ``limit``."""
    return Annotated[
        Annotated[str, Field(max_length=limit)]
        | Annotated[Any, PlainValidator(partial(as_text, limit=limit))],
        Field(union_mode="left_to_right"),
    ]


def _first_keys(value: Any) -> Any:
    if isinstance(value, dict) and len(value) > MAX_KEYS:
        return dict(islice(value.items(), MAX_KEYS))
    return value


def _table(figure: Any) -> Any:
    """A table of the first ``MAX_KEYS`` keys, each cut to 64 characters."""
    return Annotated[dict[_text(64), figure], BeforeValidator(_first_keys)]


# A server's ``usage``, ``timings`` and ``finish_reason`` reach the session file and the
# analysis. One odd value (a count of 2**70, a list where a number belongs, a float that is
# not finite) must neither stop the session writer nor turn into a figure: a number out of
# bounds is kept as text, so the raw value stays visible, and the analysis, which reads only
# numbers, passes over it. Nothing fails these types: whatever is no figure is text.
_Number = (
    Annotated[int, Field(ge=-MAX_NUMBER, le=MAX_NUMBER)]
    | Annotated[float, Field(ge=-MAX_NUMBER, le=MAX_NUMBER, allow_inf_nan=False)]
)
_Figure = Annotated[_Number | _text(MAX_TEXT), Field(union_mode="left_to_right")] | None
# Named, so that finding its adapter per streamed chunk is one lookup, not a walk of the type.
Figures = TypeAliasType(
    "Figures",
    _table(  # nested tables (``prompt_tokens_details``) once more; deeper ones as text
        Annotated[_Number | _table(_Figure) | _text(MAX_TEXT), Field(union_mode="left_to_right")]
        | None
    ),
)
FinishReason = TypeAliasType("FinishReason", Annotated[_text(64), AfterValidator(printable)])


def numbers(table: dict[str, Any]) -> dict[str, Any]:
    """A server's table of figures (``usage``, ``timings``) as ``Figures`` keeps it."""
    return adapter(Figures).validate_python(table, strict=True)


def request_payload(
    workload: WorkloadSettings,
    prompt: str,
    seed: int,
    messages: list[Message] | None = None,
    id_slot: int | None = None,
) -> tuple[str, dict[str, Any]]:
    """The endpoint path and JSON body for one request, streamed unless the workload says
    otherwise. A chat request's messages are ``prompt`` as one user message, or a
    conversation's ``messages`` so far; ``id_slot`` asks llama-server for that slot."""
    body: dict[str, Any] = {
        "model": workload.model_name,
        "max_tokens": workload.max_tokens,
        "temperature": workload.temperature,
        "seed": seed,
        "stream": workload.stream,
        "cache_prompt": workload.cache_prompt,
    }
    if workload.stream:
        body["stream_options"] = {"include_usage": True}
    if id_slot is not None:
        body["id_slot"] = id_slot
    if workload.ignore_eos:
        body["ignore_eos"] = True
    if workload.endpoint == "chat":
        body["messages"] = messages or [{"role": "user", "content": prompt}]
        return "/v1/chat/completions", body
    body["prompt"] = prompt
    return "/v1/completions", body


def _chunk_texts(choice: dict[str, Any]) -> tuple[str, str]:
    """A choice's reasoning and its answer text: a streamed chunk's ``delta`` or a whole
    answer's ``message`` (``reasoning_content`` as llama-server and SGLang name it,
    ``reasoning`` as vLLM does, beside ``content``), or a completion's ``text`` (answer)."""
    delta = choice.get("delta", choice.get("message"))
    if isinstance(delta, dict):
        reasoning = [delta.get("reasoning_content"), delta.get("reasoning")]
        content = delta.get("content")
        return (
            "".join(p for p in reasoning if isinstance(p, str)),
            content if isinstance(content, str) else "",
        )
    text = choice.get("text")
    return "", text if isinstance(text, str) else ""


class StreamFailure(Exception):
    """A stream that broke the protocol; its message becomes the record's error."""


def _apply_payload(record: RequestRecord, payload: dict[str, Any], t_ns: int, emit: Emit) -> None:
    if "error" in payload and not payload.get("choices"):
        error = payload["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise StreamFailure(f"server error in stream: {message}")
    if isinstance(payload.get("usage"), dict):
        record.usage = numbers(payload["usage"])
    if isinstance(payload.get("timings"), dict):
        record.timings = numbers(payload["timings"])
    for choice in payload.get("choices") or []:
        if not isinstance(choice, dict):
            raise StreamFailure(f"malformed stream: choice is not an object: {choice!r:.200}")
        # A delta holding both (the turn from reasoning to answer) is two chunks of one time.
        for text, reasoning in zip(_chunk_texts(choice), (True, False), strict=True):
            if text:
                _add_chunk(record, TokenChunk(t_ns, text, reasoning), emit)
        if choice.get("finish_reason"):
            record.finish_reason = adapter(FinishReason).validate_python(
                choice["finish_reason"], strict=True
            )


def _add_chunk(record: RequestRecord, chunk: TokenChunk, emit: Emit) -> None:
    """TTFT's time is the first visible text of either kind, TTFO's the first answer's."""
    key = record.config_index, record.repeat, record.index
    if record.t_first_token_ns is None:
        record.t_first_token_ns = chunk.t_ns
        emit(FirstToken(*key, chunk.t_ns))
    if not chunk.reasoning and record.t_first_answer_ns is None:
        record.t_first_answer_ns = chunk.t_ns
    record.t_last_token_ns = chunk.t_ns
    record.chunks.append(chunk)
    emit(TokenChunkArrived(*key, chunk.t_ns, chunk.text, reasoning=chunk.reasoning))


@dataclass(frozen=True)
class PreparedRequest:
    """A request encoded before its send time, and its connection when opened ahead."""

    head: bytes
    body: bytes
    connection: StreamedResponse | None = None


def prepare_request(
    client: StreamClient,
    workload: WorkloadSettings,
    prompt: str,
    seed: int,
    messages: list[Message] | None = None,
    id_slot: int | None = None,
) -> PreparedRequest:
    path, body = request_payload(workload, prompt, seed, messages, id_slot)
    payload = json.dumps(body).encode()
    return PreparedRequest(client.request_head("POST", path, len(payload), {}), payload)


async def stream_request(
    client: StreamClient,
    record: RequestRecord,
    workload: WorkloadSettings,
    seed: int,
    emit: Emit,
    prepared: PreparedRequest | None = None,
) -> RequestRecord:
    """Send one streaming request and fill ``record``. Never raises except on cancellation.

    The connection is opened first (or was, by the caller: ``prepared.connection``) and timed
    apart (``record.connect_ns``); ``t_submit`` is taken just before the request is written,
    so TTFT holds no connection set-up."""
    prepared = prepared or prepare_request(client, workload, record.prompt, seed)
    head, payload = prepared.head, prepared.body
    parser = SSEParser()
    done = False
    response: StreamedResponse | None = None
    try:
        async with asyncio.timeout(workload.request_timeout_s):
            response = prepared.connection or await client.connect()
            record.connect_ns = response.connect_ns
            record.t_connected_ns = response.t_connected_ns

            def submitted(t_ns: int) -> None:
                record.t_submit_ns = t_ns

            await response.send(head, payload, submitted)
            assert record.t_submit_ns is not None
            emit(
                RequestSubmitted(
                    record.config_index,
                    record.repeat,
                    record.index,
                    record.warmup,
                    record.t_submit_ns,
                    record.conversation_id,
                    record.turn,
                    record.t_intended_ns,
                )
            )
            status = (await response.read_head()).status
            record.http_status = status
            if status != 200:
                raw = await response.read_bounded(ERROR_BODY_LIMIT)
                raise StreamFailure(http_error(status, raw.decode("utf-8", "replace")))
            if not workload.stream:
                await _read_whole(record, response, emit)
                done = True
            limit = max_chunks(workload)
            received = 0
            while workload.stream and (reads := await response.body()):
                for t_ns, data in reads:
                    received += len(data)
                    if received > MAX_STREAM_BYTES:
                        raise StreamFailure(
                            f"the stream passed {MAX_STREAM_BYTES // 2**20} MiB: stopped reading"
                        )
                    for event in parser.feed(data):
                        done = _handle_event(record, event.event, event.data, t_ns, emit) or done
                        if len(record.chunks) > limit:
                            raise StreamFailure(
                                f"the server sent more than {limit} token chunks for "
                                f"max_tokens = {workload.max_tokens}: stopped reading "
                                "(an endless stream?)"
                            )
            for event in parser.close():
                done = (
                    _handle_event(record, event.event, event.data, time.perf_counter_ns(), emit)
                    or done
                )
        record.t_done_ns = time.perf_counter_ns()
        if not done and record.finish_reason is None:
            raise StreamFailure(
                f"stream ended without [DONE] after {len(record.chunks)} token chunks "
                "(the server closed the connection early)"
            )
        if short := stopped_short(record, workload.max_tokens):
            raise StreamFailure(short)
        record.ok = True
    except StreamFailure as exc:
        _fail(record, str(exc))
    except SSEError as exc:
        _fail(record, f"{exc} (after {len(record.chunks)} token chunks)")
    except TimeoutError:
        _fail(
            record,
            f"timed out after {workload.request_timeout_s:g} s "
            f"({len(record.chunks)} token chunks received)",
        )
    except ConnectFailed as exc:
        _fail(record, f"cannot connect to the server: {exc}")
    except HttpStreamError as exc:
        _fail(record, f"connection broken after {len(record.chunks)} token chunks: {exc}")
    except asyncio.CancelledError:
        _fail(record, f"{CANCELLED} after {len(record.chunks)} token chunks")
        raise
    except Exception as exc:  # a stream we did not foresee must fail one request, not the run
        _fail(
            record,
            f"unexpected {type(exc).__name__} after {len(record.chunks)} token chunks: {exc}",
        )
    finally:
        if response is not None:
            client.release(response)
    return record


async def _read_whole(record: RequestRecord, response: StreamedResponse, emit: Emit) -> None:
    """A response that was not streamed: one JSON body, its text visible when its last
    byte arrived (that read's time is the first and the last token's)."""
    record.streamed = False
    body, t_last = bytearray(), 0
    while reads := await response.body():
        for t_ns, data in reads:
            body += data
            t_last = t_ns
            if len(body) > MAX_STREAM_BYTES:
                raise StreamFailure(
                    f"the response passed {MAX_STREAM_BYTES // 2**20} MiB: stopped reading"
                )
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise StreamFailure(f"malformed response: not JSON: {bytes(body[:200])!r}") from None
    if not isinstance(payload, dict):
        raise StreamFailure(f"malformed response: not a JSON object: {bytes(body[:200])!r}")
    _apply_payload(record, payload, t_last or time.perf_counter_ns(), emit)


def http_error(status: int, body: str) -> str:
    """A refused request's error: the status and what the server said. llama-server refuses a
    prompt longer than a slot's context with ``exceed_context_size_error``; such a request
    did not fail by chance but could not be served at all, so its error says so first."""
    text = body.strip() or "(no body)"
    try:
        payload = json.loads(body)
    except json.JSONDecodeError:
        payload = None
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and error.get("type") == "exceed_context_size_error":
        return f"{CONTEXT_FULL}: {error.get('message', text)} (HTTP {status})"
    return f"HTTP {status}: {text}"


def stopped_short(record: RequestRecord, max_tokens: int) -> str | None:
    """Why a response that ended with ``finish_reason = length`` short of ``max_tokens`` did
    not do the task: the slot's context filled up (llama-server stops there and logs
    ``truncated = 1``), so it generated less than asked, and its speed is not comparable."""
    tokens, _ = record.output_tokens
    if record.finish_reason != "length" or tokens is None or tokens >= max_tokens:
        return None
    prompt = (record.usage or {}).get("prompt_tokens") or record.prompt_tokens
    of_prompt = f" after a prompt of {prompt} tokens" if prompt else ""
    return (
        f"{CONTEXT_FULL}: the server stopped at {tokens} of {max_tokens} tokens"
        f"{of_prompt} (finish_reason length: the context filled up)"
    )


def _handle_event(
    record: RequestRecord, name: str | None, data: str, t_ns: int, emit: Emit
) -> bool:
    if not data.strip():
        return False  # a keep-alive or an event without data carries nothing
    if data.strip() == "[DONE]":
        return True
    try:
        payload = json.loads(data)
    except json.JSONDecodeError:
        raise StreamFailure(f"malformed stream: event data is not JSON: {data[:200]!r}") from None
    if name == "error" and isinstance(payload, dict) and "error" not in payload:
        payload = {"error": payload}
    if not isinstance(payload, dict):
        raise StreamFailure(f"malformed stream: event data is not a JSON object: {data[:200]!r}")
    _apply_payload(record, payload, t_ns, emit)
    return False


def _fail(record: RequestRecord, error: str) -> None:
    record.ok = False
    record.error = printable(error)  # it may quote what the server sent
    if record.t_done_ns is None:
        record.t_done_ns = time.perf_counter_ns()
