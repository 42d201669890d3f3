"""Replay a recording in a fresh sim and report where it diverged.

``replay(path)`` opens the sim (``open_robot("sim", ...)``) with the recorded scene, seed and
robot options, then re-issues every recorded call (``reset``, payloads, external forces) and
every accepted command at the step it was made (the ``step`` field), and compares what the sim
reads with what was recorded, per signal:

- ``joints``: ``max |q_sim - q_rec|`` over the joints, rad;
- ``tcp``: TCP position from forward kinematics, ``|p_sim - p_rec|``, m;
- ``wrench``: F/T sample, ``max |w_sim - w_rec|`` over the six components, N and N m;
- ``imu``: specific force, ``max |a_sim - a_rec|``, m/s^2.

A signal diverges at the first comparison above its tolerance. A sim recording replayed in the
sim reproduces itself exactly (the sim is deterministic); a hardware recording replayed in the
sim shows the model's error. For a hardware recording the sim starts from the first recorded
joint state.
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass, field

import numpy as np

from twin.backends import open_robot
from twin.record.reader import Recording, RecordingError, read_recording
from twin.record.robot import urdf_sha256
from twin.robot import COMMAND_FIELDS, JointCommand, Robot, RobotState

#: Signal -> (unit, default tolerance): the default is "reproduced", for sim-to-sim replay.
SIGNALS: dict[str, tuple[str, float]] = {
    "joints": ("rad", 1e-9),
    "tcp": ("m", 1e-9),
    "wrench": ("N, N m", 1e-9),
    "imu": ("m/s^2", 1e-9),
}


@dataclass(frozen=True)
class Divergence:
    """One signal's comparison: ``first_t_us`` (robot time) and ``first_size`` of the first
    difference above ``tolerance`` (None and 0 when there is none), and the largest difference."""

    signal: str
    unit: str
    tolerance: float
    compared: int
    first_t_us: int | None
    first_size: float
    max_size: float

    @property
    def diverged(self) -> bool:
        return self.first_t_us is not None


@dataclass
class ReplayReport:
    """Per-signal divergences and their time series (robot time us, difference)."""

    path: pathlib.Path
    divergences: dict[str, Divergence]
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(repr=False)

    @property
    def reproduced(self) -> bool:
        """True when no signal diverged."""
        return not any(d.diverged for d in self.divergences.values())

    def table(self) -> str:
        """A plain-text table, one row per signal."""
        head = ("signal", "unit", "compared", "tolerance", "first divergence s", "size", "max")
        rows = [head]
        for d in self.divergences.values():
            first = "-" if d.first_t_us is None else f"{d.first_t_us * 1e-6:.3f}"
            size = "-" if d.first_t_us is None else f"{d.first_size:.3g}"
            rows.append(
                (
                    d.signal,
                    d.unit,
                    str(d.compared),
                    f"{d.tolerance:g}",
                    first,
                    size,
                    f"{d.max_size:.3g}",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)

    def plot(self, path: str | os.PathLike) -> pathlib.Path:
        """A PNG of every signal's difference against time (log scale), tolerances dashed."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(
            len(self.series), 1, figsize=(8, 2.2 * len(self.series)), squeeze=False
        )
        for ax, (name, (t_us, diff)) in zip(axes[:, 0], self.series.items()):
            d = self.divergences[name]
            ax.semilogy(t_us * 1e-6, np.maximum(diff, 1e-16), lw=1)
            ax.axhline(d.tolerance, ls="--", color="k", lw=0.8)
            if d.first_t_us is not None:
                ax.axvline(d.first_t_us * 1e-6, color="r", lw=0.8)
            ax.set_ylabel(f"{name} [{d.unit}]")
        axes[-1, 0].set_xlabel("robot time [s]")
        fig.suptitle(f"replay of {self.path.name}: difference sim - recording")
        fig.tight_layout()
        out = pathlib.Path(path)
        fig.savefig(out, dpi=100)
        plt.close(fig)
        return out


def _sim_options(recording: Recording) -> dict:
    meta = recording.metadata
    if meta.get("backend") == "sim":
        return dict(meta.get("robot_options") or {})
    return {k: meta[k] for k in ("scene", "seed") if meta.get(k) is not None}


def replay(
    path: str | os.PathLike,
    tolerances: dict[str, float] | None = None,
    robot: Robot | None = None,
) -> ReplayReport:
    """Replay ``path`` in a fresh sim (or in ``robot``, which is then not closed) and compare.

    ``tolerances``: signal -> tolerance, overriding ``SIGNALS``' defaults. Raises
    ``RecordingError`` for a file that is not a replayable twin recording.
    """
    recording = read_recording(path)
    tol = {name: t for name, (_, t) in SIGNALS.items()}
    for name, value in (tolerances or {}).items():
        if name not in SIGNALS:
            raise ValueError(f"unknown replay signal {name!r}; expected one of {list(SIGNALS)}")
        tol[name] = float(value)
    if not recording.on("/robot/state"):
        raise RecordingError(f"{str(recording.path)!r} has no /robot/state messages to replay")
    sim = robot if robot is not None else open_robot("sim", **_sim_options(recording))
    try:
        digest = recording.metadata.get("urdf_sha256")
        if digest is not None and digest != urdf_sha256(sim.model.urdf_path):
            raise RecordingError(
                f"{str(recording.path)!r} was recorded with another URDF "
                f"({recording.metadata.get('urdf')}); expected the replay robot's "
                f"{sim.model.urdf_path.name}"
            )
        series = _run(recording, sim)
    finally:
        if robot is None:
            sim.close()
    divergences = {}
    for name, (t_us, diff) in series.items():
        over = np.flatnonzero(diff > tol[name])
        first = int(over[0]) if len(over) else None
        divergences[name] = Divergence(
            name,
            SIGNALS[name][0],
            tol[name],
            len(diff),
            None if first is None else int(t_us[first]),
            0.0 if first is None else float(diff[first]),
            float(diff.max()) if len(diff) else 0.0,
        )
    return ReplayReport(recording.path, divergences, series)


def _run(recording: Recording, sim: Robot) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    samples: dict[str, list[tuple[int, float]]] = {name: [] for name in SIGNALS}
    steps = 0
    state: RobotState | None = None
    state_step = -1
    if recording.metadata.get("backend") != "sim" and callable(getattr(sim, "reset", None)):
        sim.reset(q=np.array(recording.on("/robot/state")[0].data["q"]))
    for m in recording.messages:
        step = m.data.get("step")
        if step is None:
            continue  # /tf, /tcp: derived from the joints
        while steps < step:
            sim.step()
            steps += 1
        if m.topic == "/robot/call":
            args = dict(m.data["args"])
            positional = args.pop("args", [])
            getattr(sim, m.data["call"])(*positional, **args)
            state_step = -1
            continue
        if m.topic == "/robot/command":
            if m.data["accepted"]:
                sim.write(JointCommand(*(np.array(m.data[f]) for f in COMMAND_FIELDS)))
            continue
        if m.topic != "/robot/state":
            continue
        if state_step != steps:
            state, state_step = sim.read(), steps
        data, t_us = m.data, m.data["t_us"]
        q_rec = np.array(data["q"])
        samples["joints"].append((t_us, float(np.max(np.abs(state.q - q_rec)))))
        p_sim = sim.model.fk(state.q, "tcp")[:3, 3]
        p_rec = sim.model.fk(q_rec, "tcp")[:3, 3]
        samples["tcp"].append((t_us, float(np.linalg.norm(p_sim - p_rec))))
        if data.get("wrench") is not None:
            w = state.wrench
            rec = data["wrench"]["wrench"]
            diff = np.inf if w is None else float(np.max(np.abs(w.wrench - rec)))
            samples["wrench"].append((t_us, diff))
        if data.get("imu") is not None:
            imu = state.imu
            rec = data["imu"]["specific_force"]
            diff = np.inf if imu is None else float(np.max(np.abs(imu.specific_force - rec)))
            samples["imu"].append((t_us, diff))
    return {
        name: (
            np.array([t for t, _ in s], dtype=np.int64),
            np.array([d for _, d in s], dtype=float),
        )
        for name, s in samples.items()
        if s
    }
