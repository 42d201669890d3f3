"""The report's figures: matplotlib on its Agg canvas (no display, no pyplot state).

Each function returns a ``matplotlib.figure.Figure``; ``save`` writes one as PNG. Units: time s,
joint positions rad, positions m (plotted in mm where stated), forces N, torques N m, specific
force m/s^2, angular rate rad/s. ``phase`` arrays (K,) label each sample; consecutive samples
with the same label are shaded as one span.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from twin.report.camera import Camera

#: One colour per series, cycled.
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
AXES_XYZ = ("x", "y", "z")


def _figure(width_in: float, height_in: float) -> Figure:
    fig = Figure(figsize=(width_in, height_in), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as PNG to ``path``; returns the path."""
    path = Path(path)
    fig.savefig(path, format="png")
    return path


def phase_spans(phase: np.ndarray) -> list[tuple[int, int, str]]:
    """Runs of equal labels: (first index, last index + 1, label); empty labels skipped."""
    spans, start = [], 0
    for k in range(1, len(phase) + 1):
        if k == len(phase) or phase[k] != phase[start]:
            if phase[start]:
                spans.append((start, k, str(phase[start])))
            start = k
    return spans


def _shade(ax, t: np.ndarray, phase: np.ndarray, label_top: bool = False) -> None:
    """Alternate shading of the phases (labelled by their move name) on ``ax``."""
    names = [s for s in phase_spans(phase)]
    for i, (a, b, name) in enumerate(names):
        if i % 2 == 0:
            ax.axvspan(t[a], t[b - 1], color="0.92", zorder=0)
        if label_top and (i == 0 or name.split(":")[0] != names[i - 1][2].split(":")[0]):
            ax.text(t[a], 1.0, name.split(":")[0], transform=ax.get_xaxis_transform(),
                    fontsize=7, va="bottom", rotation=30)  # fmt: skip


def joints(
    t: np.ndarray, q: np.ndarray, q_des: np.ndarray, phase: np.ndarray, names: Sequence[str]
) -> Figure:
    """Measured joint positions (K, n) rad against their commanded targets, one panel a joint."""
    n = q.shape[1]
    fig = _figure(11, 1.6 * n + 0.6)
    axes = fig.subplots(n, 1, sharex=True)
    for j, ax in enumerate(np.atleast_1d(axes)):
        _shade(ax, t, phase, label_top=j == 0)
        ax.plot(t, q_des[:, j], color="0.3", lw=1.0, ls="--", label="target (q_des)")
        ax.plot(t, q[:, j], color=COLORS[j % len(COLORS)], lw=1.2, label="measured (q)")
        ax.set_ylabel(f"{names[j]}\n[rad]", fontsize=8)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].legend(loc="upper right", fontsize=7, ncols=2)
    np.atleast_1d(axes)[-1].set_xlabel("time [s]")
    fig.suptitle("Joint positions against their targets")
    return fig


Series = Sequence[tuple[str, np.ndarray, np.ndarray | None]]
Paths = Sequence[tuple[str, np.ndarray]]


def tcp_paths(
    series: Series,
    reaches: Paths = (),
    targets: np.ndarray | None = None,
    title: str = "TCP path against the plan",
    targets_label: str = "policy targets",
) -> Figure:
    """Top (x-y) and side (x-z) views of TCP paths (mm, world). ``series``: planned moves
    (label, planned (K, 3) m, measured (K, 3) m or None): the plan solid, the measured path
    dotted, the end a dot. ``reaches``: (label, (K, 3) m) paths without a plan (the policy's),
    dashed; ``targets`` (M, 3) m stars. With measured paths, a third panel shows the tracking
    error |measured - planned| (mm) against the control cycle."""
    tracked = [s for s in series if s[2] is not None]
    fig = _figure(14 if tracked else 10, 4.8)
    axes = fig.subplots(1, 3 if tracked else 2)
    for ax, (i, k), view in zip(axes, ((0, 1), (0, 2)), ("top view", "side view")):
        for c, (label, planned, measured) in enumerate(series):
            color = COLORS[c % len(COLORS)]
            ax.plot(planned[:, i] * 1e3, planned[:, k] * 1e3, color=color, lw=1.6, label=label)
            if measured is not None:
                ax.plot(measured[:, i] * 1e3, measured[:, k] * 1e3, color="k", lw=0.6, ls=":")
            ax.plot(*(planned[-1, [i, k]] * 1e3), marker="o", ms=4, color=color)
        for c, (label, path) in enumerate(reaches):
            shade = str(0.15 + 0.5 * c / max(1, len(reaches)))
            ax.plot(path[:, i] * 1e3, path[:, k] * 1e3, color=shade, lw=1.0, ls="--", label=label)
        if targets is not None and len(targets):
            ax.plot(targets[:, i] * 1e3, targets[:, k] * 1e3, "k*", ms=9, label=targets_label)
        ax.set_xlabel(f"{AXES_XYZ[i]} [mm]")
        ax.set_ylabel(f"{AXES_XYZ[k]} [mm]")
        ax.set_title(f"{view} (plan solid, measured dotted)", fontsize=9)
        ax.set_aspect("equal", adjustable="datalim")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, loc="best")
    if tracked:
        ax, offset = axes[2], 0
        for c, (label, planned, measured) in enumerate(series):
            if measured is None:
                continue
            err = np.linalg.norm(measured - planned, axis=1) * 1e3
            cycles = offset + np.arange(len(err))
            ax.plot(cycles, err, color=COLORS[c % len(COLORS)], lw=1.0, label=label)
            offset += len(err)
        ax.set_xlabel("control cycle (moves back to back)")
        ax.set_ylabel("|measured - planned| [mm]")
        ax.set_title("tracking error (the arm lags the plan in motion)", fontsize=9)
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    return fig


def _traces(fig_title: str, t, groups, phase, marks=(), zoom=None) -> Figure:
    """Stacked panels: ``groups`` = [(values (K, 3), labels, unit), ...]; ``marks`` =
    [(value, panel, axis label), ...] horizontal reference lines; ``zoom`` (t0, t1) s: the last
    panel shows only that window (the others share the whole time axis)."""
    fig = _figure(11, 2.6 * len(groups) + 0.6)
    axes = np.atleast_1d(fig.subplots(len(groups), 1))
    for ax in axes[1 : len(axes) - (zoom is not None)]:
        ax.sharex(axes[0])
    for g, (ax, (values, labels, unit)) in enumerate(zip(axes, groups)):
        _shade(ax, t, phase, label_top=g == 0)
        rows = np.all(np.isfinite(values), axis=1)  # channels taken every few cycles
        for c in range(values.shape[1]):
            ax.plot(t[rows], values[rows, c], color=COLORS[c], lw=0.9, label=labels[c])
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right", ncols=len(labels))
    for value, panel, label in marks:
        axes[panel].axhline(value, color="k", ls="--", lw=0.8)
        ax = axes[panel]
        ax.text(
            0.0, value, f" {label}", fontsize=7, va="bottom", transform=ax.get_yaxis_transform()
        )
    axes[-1].set_xlabel("time [s]")
    if zoom is not None:
        axes[-1].set_xlim(*zoom)
    fig.suptitle(fig_title)
    return fig


def wrench(
    t: np.ndarray,
    wrench6: np.ndarray,
    phase: np.ndarray,
    frame: str,
    marks=(),
    zoom: tuple[float, float] | None = None,
) -> Figure:
    """Force (N) and torque (N m) traces (K, 6) ``[fx, fy, fz, tx, ty, tz]`` in ``frame``;
    with ``zoom`` (t0, t1) s a third panel shows Fz over that window with the ``marks``."""
    groups = [
        (wrench6[:, :3], ("Fx", "Fy", "Fz"), "force [N]"),
        (wrench6[:, 3:], ("Tx", "Ty", "Tz"), "torque [N m]"),
    ]
    if zoom is not None:
        inside = (t >= zoom[0]) & (t <= zoom[1])
        fz = np.where(inside, wrench6[:, 2], np.nan)[:, None]
        groups.append((fz, ("Fz",), "Fz [N] (zoom)"))
        marks = [*marks, *((value, 2, label) for value, panel, label in marks if panel == 0)]
    return _traces(f"F/T sensor, {frame}", t, groups, phase, marks, zoom)


def imu(
    t: np.ndarray, specific_force: np.ndarray, angular_rate: np.ndarray, phase: np.ndarray
) -> Figure:
    """IMU traces: specific force (K, 3) m/s^2 and angular rate (K, 3) rad/s, IMU frame."""
    groups = [
        (specific_force, ("ax", "ay", "az"), "specific force [m/s^2]"),
        (angular_rate, ("wx", "wy", "wz"), "angular rate [rad/s]"),
    ]
    return _traces("IMU (IMU frame)", t, groups, phase)


def snapshot(
    image: np.ndarray,
    camera: Camera,
    paths: Paths,
    reaches: Paths = (),
    targets: np.ndarray | None = None,
    title: str = "Scene with the planned TCP path",
    targets_label: str = "policy targets",
) -> Figure:
    """The rendered scene (H, W, 3) uint8 with planned ``paths`` (label, (K, 3) m world) drawn
    over it through ``camera``'s projection (each end marked), ``reaches`` dashed and
    ``targets`` (M, 3) m as stars."""
    h, w = image.shape[:2]
    fig = _figure(w / 80, h / 80 + 0.4)
    ax = fig.subplots()
    ax.imshow(image)

    def draw(points, **style):
        px, front = camera.project(points)
        px = np.where(front[:, None], px, np.nan)
        ax.plot(px[:, 0], px[:, 1], **style)
        return px

    for c, (label, points) in enumerate(paths):
        color = COLORS[c % len(COLORS)]
        px = draw(points, color=color, lw=2.0, label=label)
        ax.plot(px[-1, 0], px[-1, 1], marker="o", ms=5, color=color, mec="k")
    for label, points in reaches:
        draw(points, color="0.15", lw=1.2, ls="--", label=label)
    if targets is not None and len(targets):
        draw(targets, color="k", ls="none", marker="*", ms=10, mfc="yellow", label=targets_label)
    ax.set_xlim(0, w)
    ax.set_ylim(h, 0)
    ax.set_axis_off()
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title(title, fontsize=10)
    return fig


def joint_path(q: np.ndarray, names: Sequence[str], breaks: Sequence[int] = ()) -> Figure:
    """Joint positions (K, n) rad along a planned path (sample index), way-point ``breaks``."""
    fig = _figure(9, 3.6)
    ax = fig.subplots()
    for j in range(q.shape[1]):
        ax.plot(q[:, j], color=COLORS[j % len(COLORS)], lw=1.2, label=names[j])
    for b in breaks:
        ax.axvline(b, color="0.6", lw=0.6, ls=":")
    ax.set_xlabel("sample along the path")
    ax.set_ylabel("joint position [rad]")
    ax.legend(fontsize=7, ncols=len(names))
    ax.grid(alpha=0.3)
    return fig
