"""The values another tool's file may hold, as the pydantic types its readers' models are made
of: each with the bound a file from anyone is held to, so a wrong type or an absurd value is
one line naming where it is (``validated``), never a traceback or a stored NaN."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)

from workbench.engine.base.validation import MAX_NUMBER, MAX_TEXT

MAX_REQUESTS = 100_000  # per run, as an experiment's ``requests``
MAX_CHUNKS = 2_000_000  # in the whole file: each becomes a row (a 2 GB, 100 s write at 10 M)
MAX_ANSWER = 1_000_000  # characters of one answer kept
MAX_ERROR = 2_000  # characters of a request's error kept
MAX_FIGURES = 1_000  # figures a file states per run
MAX_SECONDS = 10**7  # a duration (115 days): beyond it a value is not a time but damage
MAX_MS = MAX_SECONDS * 1000
MAX_CLOCK_S = 10**10  # a clock reading (seconds since any origin a tool uses, epoch included)


class Table(BaseModel):
    """A table of another tool's file: strict (text is not a number, 1.0 is not a count),
    and the fields the workbench does not read are passed over."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True, defer_build=True)


def _cut(limit: int) -> Callable[[str], str]:
    return lambda text: text[:limit]


Number = Annotated[float, Field(allow_inf_nan=False)]
Rate = Annotated[float, Field(ge=0, allow_inf_nan=False)]  # requests per second; 0: none
Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]  # a duration
Milliseconds = Annotated[float, Field(ge=0, le=MAX_MS, allow_inf_nan=False)]
Clock = Annotated[float, Field(ge=-MAX_CLOCK_S, le=MAX_CLOCK_S, allow_inf_nan=False)]
Epoch = Annotated[float, Field(ge=0, le=MAX_CLOCK_S, allow_inf_nan=False)]  # seconds since 1970


def _whole(value: Any) -> Any:
    """A count some tools write as a float (``2.0``): taken as the whole number it is; a
    fraction, a bool or text is left for the strict check to refuse."""
    return int(value) if type(value) is float and value.is_integer() else value


# Of tokens or requests; a float that is a whole number is one (the readers took it so).
Count = Annotated[int, BeforeValidator(_whole), Field(ge=0, le=MAX_NUMBER)]
Text = Annotated[str, AfterValidator(_cut(MAX_TEXT))]  # a name or a label, cut short
ErrorText = Annotated[str, AfterValidator(_cut(MAX_ERROR))]
Answer = Annotated[str, AfterValidator(_cut(MAX_ANSWER))]
PerRequest = Field(max_length=MAX_REQUESTS)  # a run's list of one value per request
Gaps = Annotated[list[Seconds], Field(max_length=MAX_CHUNKS)]  # between a request's chunks


def _iso(text: str) -> str:
    try:
        return datetime.fromisoformat(text[:MAX_TEXT]).isoformat(timespec="seconds")
    except ValueError:
        raise ValueError("must be a date in ISO 8601 (2026-11-30T20:58:46)") from None


# When the file says its benchmark ran, as a session's ``created_at`` (to the second). A time
# without a zone stays without one: the file does not say which it was.
IsoDate = Annotated[str, AfterValidator(_iso)]


def epoch_date(seconds: float) -> str:
    """Epoch seconds (an ``Epoch``) as a session's ``created_at``, in UTC."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


_FIGURE = TypeAdapter(Annotated[float, Field(ge=-MAX_NUMBER, le=MAX_NUMBER, allow_inf_nan=False)])


def figures(found: dict[str, Any]) -> dict[str, float]:
    """Figures a file states, kept under its own names: the finite numbers among ``found``
    (anything else is no figure, and passed over), at most ``MAX_FIGURES`` of them, each
    name cut to ``MAX_TEXT`` characters."""
    kept: dict[str, float] = {}
    for key, value in found.items():
        if len(kept) >= MAX_FIGURES:
            break
        try:
            kept[str(key)[:MAX_TEXT]] = _FIGURE.validate_python(value, strict=True)
        except ValidationError:
            continue
    return kept
