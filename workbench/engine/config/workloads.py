"""The ``[workload]`` table: the three kinds of workload the run knows, as a discriminated union.

A workload is the requests fired at a server for one configuration, and one of three kinds,
each a class with only its own fields and their defaults (``WorkloadSettings`` holds what
every kind has): ``RequestsWorkload`` (independent requests at an arrival rate),
``ConversationsWorkload`` (chats of several turns, ``kind = "conversations"``) and
``TraceWorkload`` (a recorded trace replayed, ``arrival = "trace"``). The file says which by
``kind`` and ``arrival`` (``kind_of``); a field of another kind is refused naming it, and code
asks a workload's type, never a string. Rules between one kind's own fields are its class's
validators (``refuse``).
"""

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic_core import core_schema

from workbench.engine.config.settings import (
    CONFIG,
    DAY_S,
    Int,
    NonEmpty,
    Number,
    Range,
    Switch,
    Text,
    refuse,
    setting,
    shown,
)

MAX_WORKERS = 256  # client processes: more than any machine's cores a client would use
Endpoint = Literal["chat", "completion"]
Spread = Literal["fixed", "uniform", "normal"]
ThinkSpread = Literal["fixed", "exponential"]
IdSlot = Literal["auto", "conversation"]
TIMED = ("poisson", "gamma", "fixed")
"""The arrivals that send at ``rate``."""

KIND = setting(
    label="kind",
    help=(
        "`requests` (independent requests, as `requests`, `arrival` and `concurrency` say) or "
        "`conversations`: `users` chats at once, each sending `turns` questions in order, every "
        "turn carrying the conversation so far with the server's real answers (`cache_prompt` "
        'is on unless the file says otherwise); `arrival = "trace"` makes a requests '
        "workload a trace's"
    ),
    in_form=True,
)
ARRIVAL = setting(
    label="arrival",
    help=(
        "`burst` (all at t0), or at `rate`: `poisson`, `gamma` (gaps as bursty as "
        "`burstiness` says) or `fixed`; or `trace`: when a recorded `trace` says"
    ),
    in_form=True,
)

CachePrompt = Annotated[
    Switch,
    setting(
        label="prompt cache",
        help=(
            "let the server reuse a prompt's prefix already in the slot's cache "
            "(`timings.cache_n` says how many tokens it reused)"
        ),
        short="cache",
        in_form=True,
    ),
]


@dataclass(frozen=True, kw_only=True)
class WorkloadSettings:
    """The requests fired at a server for one configuration: what every kind of workload
    has. A workload is always one of the kinds below (``KINDS``)."""

    __pydantic_config__ = CONFIG
    TABLE: ClassVar[str] = "workload"
    KINDS: ClassVar[tuple[type["WorkloadSettings"], ...]] = ()
    """The kinds, in the order a form offers them (set below, once they are declared)."""
    NAME: ClassVar[str] = ""
    """How the kind is named where a field does not belong to it."""
    ORDER: ClassVar[tuple[str, ...]] = ()
    """The table's fields in order (``TABLE_ORDER``)."""

    @staticmethod
    def kind_for(values: Mapping[str, Any]) -> type["WorkloadSettings"]:
        return kind_of(values)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """Pydantic's schema of the kind, then its rules between fields (``_rules``)."""
        return core_schema.no_info_after_validator_function(cls._rules, handler(source))

    def _rules(self) -> "WorkloadSettings":
        """What one kind's fields must be together (``refuse`` names the field)."""
        return self

    requests: Annotated[
        Int,
        Range(1, 100_000),
        setting(
            label="requests",
            help=(
                "requests per repeat (a `conversations` run sends `users` x `turns` instead, a "
                "`trace` run its rows)"
            ),
            in_form=True,
            hint="8",
        ),
    ] = 8
    max_tokens: Annotated[
        Int,
        Range(1, 1_000_000),
        setting(
            label="max tokens",
            help="tokens to generate per request (a `trace` row asks its own `output_length`)",
            in_form=True,
            hint="64",
        ),
    ] = 64
    temperature: Annotated[
        Number,
        Range(0, 100),
        setting(
            label="temperature",
            help="sampling temperature",
        ),
    ] = 0.0
    seed: Annotated[
        Int,
        Range(-(2**63), 2**63 - 1),
        setting(
            label="seed",
            help="sampling seed; request *i* gets `seed + i`",
        ),
    ] = 42
    prompts: Annotated[
        Text,
        NonEmpty("must be 'builtin' or a file path"),
        setting(
            label="prompts",
            help='built-in prompts (unique per request), a `.jsonl` file of `{"prompt": ...}` '
            "objects, or a text file with one prompt per line (reused in turn if there are "
            "fewer than requests); relative to the experiment file",
            in_form=True,
            hint="builtin, or a .jsonl / .txt file",
        ),
    ] = "builtin"
    endpoint: Annotated[
        Endpoint,
        setting(
            label="endpoint",
            help="`chat` (`/v1/chat/completions`) or `completion` (`/v1/completions`)",
        ),
    ] = "chat"
    stream: Annotated[
        Switch,
        setting(
            label="stream",
            help=(
                "stream each answer token by token; `false` asks for the whole answer at once, "
                "so its first visible text is the whole response (TTFT equals E2E latency)"
            ),
            short="stream",
            in_form=True,
        ),
    ] = True
    cache_prompt: CachePrompt = False
    ignore_eos: Annotated[
        Switch,
        setting(
            label="ignore EOS",
            help="generate exactly `max_tokens` (stable comparisons)",
        ),
    ] = True
    repeats: Annotated[
        Int,
        Range(1, 1000),
        setting(
            label="repeats",
            help="measured repeats per configuration (mean and spread are reported)",
            in_form=True,
            hint="1",
        ),
    ] = 1
    warmup: Annotated[
        Int,
        Range(0, 1000),
        setting(
            label="warm-up",
            help="sequential warm-up requests per configuration, recorded but not counted",
            in_form=True,
            hint="1",
        ),
    ] = 1
    request_timeout_s: Annotated[
        Number,
        Range(0.1, DAY_S, note="seconds"),
        setting(
            label="request timeout (s)",
            help="a request that takes longer is recorded as failed",
        ),
    ] = 300.0
    model_name: Annotated[
        Text,
        setting(
            label="model name",
            help="the `model` field sent (external servers may need it)",
        ),
    ] = "default"

    @property
    def per_repeat(self) -> int:
        """Requests one repeat sends."""
        return self.requests

    @property
    def longest_prompt_tokens(self) -> int:
        """The longest prompt a slot must hold, the chat template's tokens aside (0: not
        known, prompts as written)."""
        return 0

    @property
    def effective_concurrency(self) -> int:
        """How many requests may be in flight at once, as sent."""
        return self.requests

    @property
    def scheduled(self) -> bool:
        """Whether requests go at times of their own (a rate, a trace), not each as soon as
        it may (all at once, or a conversation's next turn when the answer came)."""
        return False

    def one_at_a_time(self) -> "RequestsWorkload":
        """This workload's requests sent one after another, all due at once: its warm-ups
        (and the prediction of them)."""
        own = {f.name for f in dataclasses.fields(RequestsWorkload)} - {"kind", "arrival"}
        shared = {name: getattr(self, name) for name in own if hasattr(self, name)}
        return RequestsWorkload(**{**shared, "concurrency": 1})


@dataclass(frozen=True, kw_only=True)
class SentRequests(WorkloadSettings):
    """Requests sent each on its own (not a conversation's turns): at their arrival times,
    as many in flight as ``concurrency`` allows, from ``workers`` client processes."""

    concurrency: Annotated[
        Int,
        Range(0, 10_000, note='0 = all at once, or "slots"'),
        setting(
            label="concurrency",
            help='client-side limit on requests in flight; `0` = all at once; `"slots"` = as many '
            "as the configuration's slots (a sweep over slots keeps the two equal; with "
            "`-np -1` there is no fixed count, so no limit)",
            in_form=True,
            hint='0 = all at once, or "slots"',
            follows="slots",
        ),
    ] = 0
    stop_when_saturated: Annotated[
        Switch,
        setting(
            label="stop when saturated",
            help=(
                "stop sending a repeat's requests once its queue grows without bound (the test "
                "behind `over_saturated`, checked every second as the requests go): those sent "
                "finish, the rest are recorded as not sent and no figure counts them"
            ),
        ),
    ] = False
    workers: Annotated[
        Int,
        Range(1, MAX_WORKERS, note="client processes"),
        setting(
            label="client workers",
            help=(
                "client processes that send a repeat's requests, each with its own event loop "
                "(pinned to a core of its own where the system allows): the requests are dealt "
                "round-robin, `concurrency` is shared out between them, and every request keeps "
                "its time from the one arrival schedule; `1` sends them all from the run's own "
                "loop (one loop takes about 23,000 token events/s); `conversations` take `1`"
            ),
            short="workers",
        ),
    ] = 1

    @property
    def effective_concurrency(self) -> int:
        """0 means no client-side limit, and a limit above the request count holds no more
        than the requests."""
        return min(self.concurrency or self.requests, self.requests)


@dataclass(frozen=True, kw_only=True)
class RequestsWorkload(SentRequests):
    """Independent requests: all at once, or at ``rate`` as ``arrival`` says, each prompt
    sized by ``input_tokens``."""

    NAME: ClassVar[str] = 'kind = "requests"'

    kind: Annotated[Literal["requests"], KIND] = "requests"
    arrival: Annotated[Literal["burst", "poisson", "gamma", "fixed"], ARRIVAL] = "burst"
    rate: Annotated[
        Number,
        Range(0.001, 100_000, also=(0,), note="requests/s, 0 for burst"),
        setting(
            label="rate",
            help="requests per second for `poisson` / `fixed`",
            in_form=True,
            hint="requests/s for poisson or fixed",
        ),
    ] = 0.0
    burstiness: Annotated[
        Number,
        Range(0.01, 1000, note="gamma shape"),
        setting(
            label="burstiness",
            help=(
                "for `gamma` arrivals, the gamma distribution's shape (as `vllm bench serve "
                "--burstiness`): 1 is Poisson, below 1 burstier, above 1 steadier; the mean rate "
                "stays `rate`"
            ),
        ),
    ] = 1.0
    input_tokens: Annotated[
        Int,
        Range(0, 10_000_000, note="0 = prompts as written"),
        setting(
            label="input tokens",
            help=(
                "each prompt's length in tokens as the server counts it, chat template included: "
                "the prompt is padded with synthetic text (or cut) to exactly this, using the "
                "server's own `/tokenize`; `0` sends the prompts as written"
            ),
            short="in",
            in_form=True,
            hint="0 = prompts as written",
        ),
    ] = 0
    input_spread: Annotated[
        Spread,
        setting(
            label="input spread",
            help=(
                "how `input_tokens` varies between requests: `fixed`, `uniform` (within "
                "`input_tokens` ± `input_spread_tokens`) or `normal` (mean `input_tokens`, "
                "standard deviation `input_spread_tokens`); each request's length is drawn "
                "from `seed`"
            ),
        ),
    ] = "fixed"
    input_spread_tokens: Annotated[
        Int,
        Range(0, 10_000_000, note="tokens"),
        setting(
            label="input spread (tokens)",
            help=(
                "the half-width (`uniform`) or standard deviation (`normal`) of the prompt lengths"
            ),
        ),
    ] = 0
    shared_prefix_tokens: Annotated[
        Int,
        Range(0, 10_000_000, note="tokens"),
        setting(
            label="shared prefix",
            help=(
                "every prompt of a configuration starts with the same text of this many tokens "
                "(a long system prompt; by the server's tokenizer), then its own question: with "
                "`cache_prompt = true` the server can reuse the shared part; `0` = none"
            ),
            short="prefix",
            in_form=True,
            hint="0 = none",
        ),
    ] = 0

    @property
    def longest_prompt_tokens(self) -> int:
        return self.input_tokens

    @property
    def scheduled(self) -> bool:
        return self.arrival != "burst"

    def _rules(self) -> "RequestsWorkload":
        """A timed arrival needs a rate, and a run is bounded to a day."""
        if self.arrival in TIMED and self.rate <= 0:
            refuse(
                "arrival",
                self.arrival,
                "arrival 'poisson', 'gamma' or 'fixed' needs rate > 0 (requests/s)",
            )
        if self.arrival in TIMED and self.requests / self.rate > DAY_S:
            hours = self.requests / self.rate / 3600
            refuse(
                "requests",
                self.requests,
                f"{self.requests} requests at {self.rate:g}/s would take {hours:.0f} hours to "
                "send: raise rate or lower requests (a run is bounded to a day)",
            )
        return self


@dataclass(frozen=True, kw_only=True)
class TraceWorkload(SentRequests):
    """A recorded trace replayed (``arrival = "trace"``): each row is a request sent when
    the trace says, its prompt and answer as long as the row says; ``requests`` is the rows
    sent, counted when the run's setup reads the trace."""

    NAME: ClassVar[str] = 'arrival = "trace"'

    kind: Annotated[Literal["requests"], KIND] = "requests"
    arrival: Annotated[Literal["trace"], ARRIVAL] = "trace"
    trace: Annotated[
        Text,
        setting(
            label="trace",
            help=(
                "for `trace` arrivals: a recorded trace to replay, JSON Lines in Mooncake's format "
                "(`timestamp` in ms, `input_length`, `output_length`, `hash_ids`) or AIPerf's "
                "(rows with `session_id`, later turns `delay` ms after the previous reply); every "
                "row is sent (up to `max_requests`), whatever `requests` says; relative to the "
                "experiment file"
            ),
            in_form=True,
            hint="a .jsonl trace, for arrival = trace",
            file_filter="Traces (*.jsonl)",
        ),
    ] = ""
    time_scale: Annotated[
        Number,
        Range(0.001, 1000, note="2 = twice as fast"),
        setting(
            label="time scale",
            help=(
                "for `trace`: how much faster than recorded the trace is replayed (2 = twice as "
                "fast)"
            ),
        ),
    ] = 1.0
    length_scale: Annotated[
        Number,
        Range(0.001, 1000, note="a factor"),
        setting(
            label="length scale",
            help=(
                "for `trace`: each row's `input_length`, `output_length` and the block of a hash "
                "id are multiplied by this (0.25 fits a production trace to a small model)"
            ),
        ),
    ] = 1.0
    block_size: Annotated[
        Int,
        Range(1, 1_000_000, note="tokens"),
        setting(
            label="block size",
            help="for `trace`: tokens of prompt per hash id, before `length_scale`",
        ),
    ] = 512
    max_requests: Annotated[
        Int,
        Range(0, 100_000, note="0 = every row"),
        setting(
            label="max requests",
            help=(
                "for `trace`: send at most this many rows (after `trace_start_s`); `0` = every row"
            ),
        ),
    ] = 0
    trace_start_s: Annotated[
        Number,
        Range(0, 10_000_000, note="seconds"),
        setting(
            label="trace start (s)",
            help=(
                "for `trace`: skip the rows before this point of the trace (seconds, as "
                "recorded) and start the rest at 0"
            ),
        ),
    ] = 0.0
    trace_duration_s: Annotated[
        Number,
        Range(0, 10_000_000, note="seconds, 0 = to the end"),
        setting(
            label="trace duration (s)",
            help=(
                "for `trace`: send only the rows that arrive within this many seconds of "
                "`trace_start_s` (as recorded; a session whose first turn arrives later is left "
                "out whole); `0` = to the end"
            ),
        ),
    ] = 0.0

    @property
    def scheduled(self) -> bool:
        return True

    def _rules(self) -> "TraceWorkload":
        if not self.trace:
            refuse("trace", self.trace, "arrival = 'trace' needs trace = \"FILE.jsonl\"")
        return self


@dataclass(frozen=True, kw_only=True)
class ConversationsWorkload(WorkloadSettings):
    """Chats of several turns: ``users`` conversations at once, each turn sent when the
    answer before it came back, carrying the conversation so far; made up (``turns`` of
    ``user_tokens``) or replayed from a ``conversations_file``, whose user messages the run's
    setup counts into ``requests``. Real chat clients send ``cache_prompt``, and coming back
    to a slot is what is measured: the prompt cache is on unless the file says otherwise."""

    NAME: ClassVar[str] = 'kind = "conversations"'

    kind: Annotated[Literal["conversations"], KIND] = "conversations"
    users: Annotated[
        Int,
        Range(1, 10_000),
        setting(
            label="users",
            help="for `conversations`: the conversations going on at once",
            short="users",
            in_form=True,
            hint="4",
        ),
    ] = 4
    turns: Annotated[
        Int,
        Range(1, 1000),
        setting(
            label="turns",
            help="for `conversations`: the questions each conversation asks, one after another",
            short="turns",
            in_form=True,
            hint="3",
        ),
    ] = 3
    think_time_s: Annotated[
        Number,
        Range(0, DAY_S, note="seconds"),
        setting(
            label="think time (s)",
            help="for `conversations`: seconds between an answer's end and the next question",
            short="think",
            in_form=True,
            hint="0",
        ),
    ] = 0.0
    think_time_spread: Annotated[
        ThinkSpread,
        setting(
            label="think time spread",
            help=(
                "for `conversations`: `fixed` (every pause `think_time_s`) or `exponential` (each "
                "pause drawn with mean `think_time_s`, request *i*'s from `seed + i`, so a sweep "
                "gives every configuration the same pauses)"
            ),
        ),
    ] = "fixed"
    user_tokens: Annotated[
        Int,
        Range(1, 10_000_000, note="tokens"),
        setting(
            label="user tokens",
            help=(
                "for `conversations`: each new user message's length in tokens, its text alone "
                "as the server's `/tokenize` counts it (the chat template's tokens come on top)"
            ),
            short="user",
            in_form=True,
            hint="64",
        ),
    ] = 64
    system_prompt_tokens: Annotated[
        Int,
        Range(0, 10_000_000, note="tokens"),
        setting(
            label="system prompt tokens",
            help=(
                "for `conversations`: a system prompt of this many tokens, the same for every "
                "conversation of a configuration; `0` = none"
            ),
            short="system",
            in_form=True,
            hint="0 (none)",
        ),
    ] = 0
    conversations_file: Annotated[
        Text,
        setting(
            label="conversations file",
            help="for `conversations`: replay a file's conversations instead of made-up ones, "
            'OpenAI messages as JSON Lines (`{"messages": [{"role": ..., "content": ...}]}` '
            'a line) or ShareGPT (`{"conversations": [{"from": ..., "value": ...}]}` a line, '
            "or a `.json` array of them); each turn sends the next recorded user message "
            "after the server's real answers (the recorded ones are not sent), `users` "
            "conversations at once, the next one starting when one ends, so a repeat sends "
            "every user message of the file once; relative to the experiment file",
            in_form=True,
            hint="a .jsonl or .json file, or empty",
            file_filter="Conversations (*.jsonl *.json)",
            short="file",
        ),
    ] = ""
    id_slot: Annotated[
        IdSlot,
        setting(
            label="slot per conversation",
            help=(
                "for `conversations`: `auto` (the server picks each turn's slot) or "
                "`conversation` (user *n*'s conversations pinned to slot (*n* - 1) mod the "
                "server's slots, sent as llama-server's `id_slot` with each of their turns)"
            ),
        ),
    ] = "auto"
    cache_prompt: CachePrompt = True

    @property
    def per_repeat(self) -> int:
        """Every turn of every conversation, whatever ``requests`` says; from a file, the
        file's user messages, which the run's setup counts into ``requests``."""
        if self.conversations_file:
            return self.requests
        return self.users * self.turns

    @property
    def longest_prompt_tokens(self) -> int:
        """A conversation's last turn, which carries the system prompt, every question and
        every answer but its own (a file's messages: as written, not known)."""
        if self.conversations_file:
            return 0
        questions = self.turns * self.user_tokens
        return self.system_prompt_tokens + questions + (self.turns - 1) * self.max_tokens

    @property
    def effective_concurrency(self) -> int:
        """One request in flight per conversation at most."""
        return self.users

    @property
    def workers(self) -> int:
        """A conversation's turns go one after another from one client."""
        return 1

    def _rules(self) -> "ConversationsWorkload":
        """A history of messages needs the chat endpoint, and a conversations file gives
        its own turns, user and system messages."""
        if self.endpoint != "chat":
            refuse(
                "endpoint",
                self.endpoint,
                f"endpoint = {shown(self.endpoint)}: kind = 'conversations' sends messages: it "
                "needs endpoint = 'chat'",
            )
        if self.conversations_file:
            for name, why in _FILE_GIVES:
                value = getattr(self, name)
                if value != _DEFAULTS[name]:
                    refuse(
                        name,
                        value,
                        f"{name} = {shown(value)}: a conversations_file {why}; leave {name} out",
                    )
        return self


_FILE_GIVES = (
    ("turns", "replays each conversation's own turns"),
    ("user_tokens", "sends its user messages as written"),
    ("system_prompt_tokens", "sends each conversation's own system message"),
    ("prompts", "takes its user messages from the file"),
)
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ConversationsWorkload)}

WorkloadSettings.KINDS = (RequestsWorkload, ConversationsWorkload, TraceWorkload)


def kind_of(values: Mapping[str, Any]) -> type["WorkloadSettings"]:
    """The kind a table of one configuration's values is: ``kind = "conversations"``, or a
    requests workload whose ``arrival = "trace"`` is a trace's."""
    if values.get("kind") == "conversations":
        return ConversationsWorkload
    if values.get("arrival") == "trace":
        return TraceWorkload
    return RequestsWorkload


def _tag(value: Any) -> str | None:
    """The tag of the kind a value is (a table of values, or settings); None for anything
    else, which the union then refuses."""
    if not isinstance(value, Mapping) and not dataclasses.is_dataclass(value):
        return None
    values = value if isinstance(value, Mapping) else dataclasses.asdict(value)
    return _TAGS[kind_of(values)]


# Each kind's tag: bracketed, as pydantic's own names are, so that an error's place names
# the input's fields alone (``base/validation.py``).
_TAGS = {
    RequestsWorkload: "kind[requests]",
    ConversationsWorkload: "kind[conversations]",
    TraceWorkload: "kind[trace]",
}


class _ByKind:
    """Pydantic's tagged union of the kinds, each tried alone: the one ``kind_of`` says."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        choices = {tag: handler.generate_schema(kind) for kind, tag in _TAGS.items()}
        return core_schema.tagged_union_schema(
            choices,
            discriminator=_tag,
            custom_error_type="workload_table",
            custom_error_message="a workload is a table of its settings",
        )


Workload = Annotated[
    Union[RequestsWorkload, ConversationsWorkload, TraceWorkload],  # noqa: UP007
    _ByKind(),
]
"""Any workload, as pydantic validates one: the kind its ``kind`` and ``arrival`` say."""

TABLE_ORDER = (
    "kind", "requests", "users", "turns", "think_time_s", "think_time_spread", "user_tokens",
    "system_prompt_tokens", "conversations_file", "id_slot", "concurrency", "arrival", "rate",
    "burstiness", "trace", "time_scale", "length_scale", "block_size", "max_requests",
    "trace_start_s", "trace_duration_s", "stop_when_saturated", "max_tokens", "temperature",
    "seed", "prompts", "input_tokens", "endpoint", "input_spread", "input_spread_tokens",
    "shared_prefix_tokens", "stream", "cache_prompt", "ignore_eos", "repeats", "warmup",
    "request_timeout_s", "model_name", "workers",
)  # fmt: skip
"""The table's fields in the order the documentation, the form and a sweep's axes take them
(the order they had before the kinds were told apart, so a sweep's configurations and labels
read as they did); a field added since comes after them."""
WorkloadSettings.ORDER = TABLE_ORDER
