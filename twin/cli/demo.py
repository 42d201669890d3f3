"""``twin demo``: one pass through the product (``twin.demo``), a summary table and a report.

While it runs, one line as each motion starts (``[..] pick: moving (free, 1.8 s)``) and one as
each step ends (``[ok] pick: ...``); the table and the report after."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from twin.backends import open_robot
from twin.cli.common import add_backend_options, backend_session, recorded

DEFAULT_OUT = Path("twin-report")


def summary_table(steps):
    """A ``rich`` table of the demo's steps: name, ok, figure."""
    from rich.table import Table

    table = Table(title="twin demo", title_justify="left", show_lines=False)
    table.add_column("step", style="bold")
    table.add_column("ok")
    table.add_column("figure", overflow="fold")
    for s in steps:
        verdict = "[green]ok[/]" if s.ok else "[red]FAIL[/]"
        if s.data.get("skipped"):
            verdict = "[yellow]skipped[/]"
        table.add_row(s.name, verdict, s.figure, end_section=False)
    return table


def _progress_line(line: str) -> None:
    """One progress line of the demo (a motion starts, a step ends), on stdout at once: above the
    progress bar on a terminal, line by line through a pipe."""
    print(line, flush=True)


def run_demo(args: argparse.Namespace) -> int:
    """``twin demo``: run ``twin.demo.run_demo``, print the table; exit 1 if a step failed. The
    table is printed also when the demo stops on an error (a recording that could not be
    written, a device fault): the steps that ended, then the error's line (``twin.cli``)."""
    from twin.demo import SCENE
    from twin.demo import run_demo as demo

    steps = []
    try:
        with backend_session(args) as options:
            backend = options.pop("backend")
            sim_options = {"scene": SCENE, "seed": args.seed}
            with contextlib.ExitStack() as stack:
                robot = None
                if args.record is not None:  # a recorded run: the demo runs on the recording robot
                    robot = stack.enter_context(
                        open_robot(backend, sim_options=sim_options, **options)
                    )
                    robot = stack.enter_context(recorded(robot, args, backend, sim_options))
                demo(
                    backend,
                    seed=args.seed,
                    out=args.out,
                    progress=args.progress,
                    print_fn=_progress_line,
                    robot=robot,
                    steps=steps,
                    **options,
                )
    except Exception:
        if steps:  # (an error before the first step, a wrong port say, is its line alone)
            print_summary(steps, args.out, stopped=True)
        raise
    return print_summary(steps, args.out)


def print_summary(steps, out: Path, stopped: bool = False) -> int:
    """The table of ``steps`` and one line counting them; the exit code (1 if a step failed or
    did not run). ``stopped``: the demo stopped on an error (its report may be missing)."""
    from rich.console import Console

    from twin.demo import STEP_NAMES

    console = Console(highlight=False)
    console.print(summary_table(steps))
    failed = [s.name for s in steps if not s.ok]
    missing = len(STEP_NAMES) - len(steps)
    text = f"demo: {len(steps) - len(failed)} of {len(steps)} steps ok"
    if failed:
        text += f"; failed: {failed}"
    if missing:
        text += f"; {missing} not run"
    if stopped:
        text += f"; stopped by an error: the report in {out}/ may be incomplete"
    else:
        text += f"; report in {out}/"
    console.print(text, markup=False)
    return 1 if failed or missing else 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="pick and place around obstacles, run the ONNX reach policy, weigh with the F/T "
        "sensor, read the IMU; writes a report folder",
    )
    add_backend_options(parser)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"report folder: PNG figures and figures.json (default ./{DEFAULT_OUT}/)",
    )
    parser.add_argument(
        "--no-progress", dest="progress", action="store_false", help="no progress bar"
    )
    parser.set_defaults(func=run_demo)
