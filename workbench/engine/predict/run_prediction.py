"""A run's prediction, made before its first configuration from this machine's stored
calibrations only: a run never spends a minute calibrating unasked. Each configuration is
predicted with the calibration that holds for its own settings (``Wanted``, the one place
a calibration is looked for, ``workbench predict``'s too); one without, or one the model
does not predict, is left out with one line of why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.records import Hardware, RequestRecord
from workbench.engine.config.experiment import RunConfig
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.figures.predicted import ConfigPrediction, PredictedRequest, RunPrediction
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.predict.calibration import (
    Calibration,
    find,
    held_settings,
    machine_identity,
    model_identity,
    refused,
    stored,
)
from workbench.engine.predict.costs import StepCosts
from workbench.engine.predict.describe import doubts
from workbench.engine.predict.sweep import PredictedConfig, predict_configs

NS = 1e9
NO_CALIBRATION = "no calibration for"  # how a configuration left out for want of one says so


class NoCalibration(WorkbenchError):
    """No stored calibration holds for a configuration's machine, model, build and settings."""


@dataclass(frozen=True)
class Wanted:
    """What a configuration's calibration must hold for: this machine, its model file, the
    server's build, the settings that change a step's cost and its ``-ub`` (which a
    calibration that measured the micro-batch prices at any value)."""

    machine: str
    model: str
    build: str | None
    settings: dict[str, Any]
    ubatch_size: int | None = None

    @classmethod
    def of(cls, config: RunConfig, hardware: Hardware, model: Path) -> Wanted:
        return cls(
            machine_identity(hardware),
            model_identity(model),
            hardware.llama_server_build,
            held_settings(config.server),
            config.server.ubatch_size,
        )

    @property
    def key(self) -> tuple[str, tuple[tuple[str, Any], ...]]:
        """Configurations of one key share one calibration."""
        return self.model, tuple(sorted(self._asked.items()))

    @property
    def _asked(self) -> dict[str, Any]:
        return {**self.settings, "ubatch_size": self.ubatch_size}

    def stored(self, folder: Path | None = None) -> Calibration | None:
        return find(self.machine, self.model, self.build, self._asked, folder)

    def stored_file(self, folder: Path | None = None) -> tuple[Path, Calibration] | None:
        """The stored calibration with its file (the probe's before a session's fit)."""
        return stored(self.machine, self.model, self.build, self._asked, folder)

    def refused(self, folder: Path | None = None) -> list[str]:
        """Why each file stored for this was not used, one line each."""
        return refused(self.machine, self.model, self.build, self._asked, folder)

    def settings_text(self) -> str:
        """The settings that differ from the defaults, as ``name=value``: what tells this
        calibration from the default one."""
        default = {**held_settings(ServerSettings()), "ubatch_size": None}
        changed = [f"{k}={v}" for k, v in self._asked.items() if v != default[k]]
        return ", ".join(changed) or "the default settings"

    def missing(self, label: str) -> str:
        """One line naming the configuration and what it lacks a calibration for."""
        model = self.model.split(" (")[0]
        return f"{label}: {NO_CALIBRATION} {model} with {self.settings_text()}"


def calibration_line(calibration: Calibration, path: Path | None = None) -> str:
    """Where a prediction's costs came from, in one line: its source, machine and date, its
    file, and what makes it doubtful (``doubts``, of its own evidence)."""
    line = f"{calibration.source} on {calibration.machine}, made {calibration.made_at}"
    if path is not None:
        line += f", {path.name}"
    said = doubts(calibration)
    return line + (f" (doubtful: {'; '.join(d.why for d in said)})" if said else "")


def prediction_notes(prediction: RunPrediction) -> list[str]:
    """What is said below a stored prediction's table: the calibrations it came from, and
    each configuration it left out with why."""
    sources = dict.fromkeys(c.calibration for c in prediction.configs)
    return [f"predicted from the calibration: {line}" for line in sources] + [
        f"not predicted: {line}" for line in prediction.left_out
    ]


def predicted_requests(records: Sequence[RequestRecord]) -> tuple[PredictedRequest, ...]:
    """The model's records as placed requests, their times after their repeat's first due
    time (each repeat starts its own clock, as a measured repeat does)."""
    origin: dict[int, int] = {}
    for r in records:
        due = r.t_intended_ns if r.t_intended_ns is not None else 0
        origin[r.repeat] = min(origin.get(r.repeat, due), due)

    def seconds(r: RequestRecord, t_ns: int | None) -> float | None:
        return None if t_ns is None else (t_ns - origin[r.repeat]) / NS

    return tuple(
        PredictedRequest(
            index=r.index,
            repeat=r.repeat,
            slot=r.slot,
            sent_s=seconds(r, r.t_submit_ns) or 0.0,
            first_token_s=seconds(r, r.t_first_token_ns),
            end_s=seconds(r, r.t_done_ns) or 0.0,
        )
        for r in records
    )


def config_prediction(predicted: PredictedConfig, calibration: str) -> ConfigPrediction:
    config = predicted.config
    return ConfigPrediction(
        config.index,
        config.label,
        predicted.summary,
        predicted_requests(predicted.records),
        predicted.requests_s,
        calibration,
    )


def predict_run(
    configs: Sequence[RunConfig],
    hardware: Hardware,
    models: Mapping[str, Path],
    prompts: PromptSource,
    base_dir: Path | None = None,
    folder: Path | None = None,
) -> RunPrediction:
    """``configs`` predicted, each from the stored calibration (in ``folder``, the user's by
    default) that holds for it on this machine (``hardware``, with the server's build);
    ``models``: each configuration's model file, by its ``[server] model``."""
    found: dict[int, Calibration] = {}
    files: dict[int, Path] = {}

    def costs_of(config: RunConfig) -> tuple[StepCosts, int]:
        wanted = Wanted.of(config, hardware, models[config.server.model])
        stored_file = wanted.stored_file(folder)
        if stored_file is None:
            raise NoCalibration(wanted.missing(config.label))
        files[config.index], calibration = stored_file
        found[config.index] = calibration
        return calibration.costs, calibration.template_tokens or 0

    predicted, left_out = [], []
    for config, result in zip(
        configs,
        predict_configs(configs, costs_of, prompts, base_dir, lambda c: found[c.index].chat),
        strict=True,
    ):
        if isinstance(result, WorkbenchError):
            left_out.append(_named(config, str(result)))
        else:
            line = calibration_line(found[config.index], files[config.index])
            predicted.append(config_prediction(result, line))
    return RunPrediction(tuple(predicted), tuple(left_out))


def _named(config: RunConfig, why: str) -> str:
    """A reason as ``label: why``, once (the model's own says ``[label] ...``)."""
    if why.startswith(f"{config.label}: "):
        return why
    return f"{config.label}: {why.removeprefix(f'[{config.label}] ')}"
