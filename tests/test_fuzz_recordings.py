"""Fuzzing the recording reader and ``twin replay`` (issue 31, item 6): flipped bytes (mostly in
compressed chunks), truncations, chunk-header counters, damage re-sealed inside a chunk (its CRC
right), malformed JSON fields, absurd step counters and time stamps, crafted metadata. Every case
ends in an exit code (0 reproduced, 1 diverged, 2 one line naming the file, 3 partial), never a
traceback, within 30 s.

The in-process entry point (``twin.cli.main``) runs the hypothesis cases (seeded by the test
profile: a failure replays with its blob); a small seeded sample runs the CLI as a subprocess.
``TWIN_FUZZ_LONG=1`` multiplies the cases by 50 (about 26,000 in all; ``TWIN_FUZZ_LONG=N`` by N
for N > 1).
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import pathlib
import random
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recording_cases import base_messages, chunk_records, chunks, record_run, reseal, rewrite

from twin.cli import main
from twin.record.mcap_scan import MAGIC

_LONG = os.environ.get("TWIN_FUZZ_LONG", "0")
FACTOR = 1 if _LONG in ("", "0") else 50 if _LONG == "1" else int(_LONG)
#: The most wall time one case may take (s): a replay without end is the failure looked for.
CASE_LIMIT_S = 30.0
EXIT_CODES = {0, 1, 2, 3}
_worst = {"s": 0.0, "cases": 0}
_codes: collections.Counter = collections.Counter()


def examples(n: int):
    return settings(max_examples=n * FACTOR)


class Base(tuple):
    """(folder, metadata, messages, bytes of the deterministic base file); a short repr, for
    hypothesis' report of a failing case."""

    def __repr__(self) -> str:
        return f"<base recording in {self[0]}>"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    record_run(folder / "run.mcap", steps=40)
    metadata, messages = base_messages(folder / "run.mcap")
    path = rewrite(folder / "base.mcap", metadata, messages)
    return Base((folder, metadata, messages, path.read_bytes()))


def run_case(path: pathlib.Path, *extra: str) -> tuple[int, str, str]:
    """``twin replay PATH`` in this process: (exit code, stdout, stderr), checked."""
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["replay", str(path), *extra])
    took = time.monotonic() - start
    _worst["s"], _worst["cases"] = max(_worst["s"], took), _worst["cases"] + 1
    _codes[code] += 1
    check(code, out.getvalue(), err.getvalue(), path, info="--info" in extra)
    assert took < CASE_LIMIT_S, f"{path}: {took:.1f} s"
    return code, out.getvalue(), err.getvalue()


def check(code: int, out: str, err: str, path: pathlib.Path, info: bool = False) -> None:
    assert code in EXIT_CODES, (code, err)
    assert "Traceback" not in err and "Traceback" not in out, err
    lines = [line for line in err.splitlines() if "pybullet build time" not in line]
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith(f"twin replay: '{path}'"), lines
    elif not info:
        assert out.strip().splitlines()[-1].split(";")[0].split(" ")[0] in (
            "reproduced",
            "diverged",
            "partial:",
        ), out


def write(base, name: str, data: bytes) -> pathlib.Path:
    path = base[0] / name
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------------- byte damage
@examples(120)
@given(st.data())
def test_flipped_bytes(base, data):
    raw = bytearray(base[3])
    spans = chunks(base[0] / "base.mcap")
    for _ in range(data.draw(st.integers(1, 3), label="flips")):
        if data.draw(st.booleans(), label="in a chunk's compressed records"):
            _, start, size = data.draw(st.sampled_from(spans), label="chunk")
            at = data.draw(st.integers(start, start + size - 1), label="at")
        else:
            at = data.draw(st.integers(0, len(raw) - 1), label="at")
        raw[at] ^= data.draw(st.integers(1, 255), label="xor")
    code, _, _ = run_case(write(base, "flip.mcap", bytes(raw)))
    if any(raw[s : s + n] != base[3][s : s + n] for _, s, n in spans):  # not flipped back
        # The chunk's CRC (or its zstd frame) catches it; with the closing magic flipped too,
        # a chunk whose length now runs past the end reads as a cut (documented).
        assert code == 2 or (code == 3 and raw[-len(MAGIC) :] != MAGIC)


@examples(60)
@given(st.integers(0, 40_000), st.booleans())
def test_truncations(base, keep, info):
    raw = base[3][: min(keep, len(base[3]) - 1)]
    code, out, _ = run_case(write(base, "cut.mcap", raw), *(["--info"] if info else []))
    if code in (0, 1, 3) and not info:
        assert code in (1, 3) and "partial: " in out  # a cut file never says 'reproduced'


@examples(60)
@given(st.data())
def test_chunk_header_counters(base, data):
    raw = bytearray(base[3])
    at, start, _ = data.draw(st.sampled_from(chunks(base[0] / "base.mcap")), label="chunk")
    field = data.draw(
        st.sampled_from([at + 1, at + 9, at + 17, at + 25, start - 8]), label="u64 field"
    )  # record length, start and end time, uncompressed size, records length
    value = data.draw(st.one_of(st.integers(0, 2**64 - 1), st.integers(0, 100_000)), label="value")
    raw[field : field + 8] = value.to_bytes(8, "little")
    run_case(write(base, "counter.mcap", bytes(raw)))


@examples(60)
@given(st.data())
def test_damage_resealed_inside_a_chunk(base, data):
    """The chunk's CRC is right: the records themselves must be checked."""
    spans = chunks(base[0] / "base.mcap")
    chunk = data.draw(st.sampled_from(spans), label="chunk")
    records = bytearray(chunk_records(base[3], chunk))
    if data.draw(st.booleans(), label="cut the records"):
        records = records[: data.draw(st.integers(0, len(records)), label="keep")]
    else:
        for _ in range(data.draw(st.integers(1, 4), label="flips")):
            at = data.draw(st.integers(0, len(records) - 1), label="at")
            records[at] ^= data.draw(st.integers(1, 255), label="xor")
    run_case(write(base, "reseal.mcap", reseal(base[3], chunk, bytes(records))))


# ------------------------------------------------------------------------- field damage
JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.sampled_from([10**400, -(10**30), 2**63, 2**63 - 1, 10**9]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=7), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


def _keys(value, prefix=()):
    """Every key path into a decoded JSON value."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*prefix, k)
            yield from _keys(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield (*prefix, i)
            yield from _keys(v, (*prefix, i))


def _replace(value, path, new, drop):
    if len(path) == 1:
        if drop and isinstance(value, dict):
            del value[path[0]]
        else:
            value[path[0]] = new
        return
    _replace(value[path[0]], path[1:], new, drop)


@examples(100)
@given(st.data())
def test_malformed_fields(base, data):
    _, metadata, messages, _ = base
    index = data.draw(st.integers(0, len(messages) - 1), label="message")
    topic, t_us, body = messages[index]
    body = json.loads(json.dumps(body))
    paths = list(_keys(body))
    if paths and data.draw(st.integers(0, 9), label="kind") > 0:
        path = data.draw(st.sampled_from(paths), label="field")
        drop = data.draw(st.booleans(), label="drop")
        _replace(body, path, data.draw(JSON_VALUES, label="value"), drop)
    else:
        body = data.draw(JSON_VALUES, label="whole body")
    out = list(messages)
    out[index] = (topic, t_us, body)
    run_case(rewrite(base[0] / "field.mcap", metadata, out))


@examples(60)
@given(st.data())
def test_absurd_counters(base, data):
    _, metadata, messages, _ = base
    stepped = [i for i, (_, _, b) in enumerate(messages) if isinstance(b, dict) and "step" in b]
    out = list(messages)
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        index = data.draw(st.sampled_from(stepped), label="message")
        topic, t_us, body = out[index]
        body = dict(body)
        key = data.draw(st.sampled_from(["step", "t_us"] if "t_us" in body else ["step"]))
        value = data.draw(
            st.one_of(
                st.integers(0, 2**63 - 1),
                st.sampled_from([10**9, 10**6, 2**62]),
                st.integers(0, 10_000),
            ),
            label="value",
        )
        body[key] = value
        log = data.draw(st.one_of(st.just(t_us), st.integers(0, 2**63 // 1000)), label="log")
        out[index] = (topic, log, body)
    run_case(rewrite(base[0] / "counters.mcap", metadata, out))


@examples(60)
@given(st.data())
def test_crafted_metadata(base, data):
    _, metadata, messages, _ = base
    meta = json.loads(json.dumps(metadata))
    options = meta["robot_options"]
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        key = data.draw(
            st.sampled_from(
                ["seed", "scene", "control_period_s", "physics_dt", "watchdog_s", "gui",
                 "joint_limits", "sensors", "joint_damping", "nonsense"]
            ),
            label="option",
        )  # fmt: skip
        options[key] = data.draw(JSON_VALUES, label="value")
    if data.draw(st.booleans(), label="backend"):
        meta["backend"] = data.draw(JSON_VALUES, label="backend value")
    if data.draw(st.booleans(), label="whole options"):
        meta["robot_options"] = data.draw(JSON_VALUES, label="options value")
    run_case(rewrite(base[0] / "meta.mcap", meta, messages))


# ---------------------------------------------------------------------- the CLI process
def _sample(base, rng: random.Random) -> list[tuple[str, bytes]]:
    raw, spans = base[3], chunks(base[0] / "base.mcap")
    cases = []
    for k in range(3):
        flipped = bytearray(raw)
        _, start, size = rng.choice(spans)
        flipped[rng.randrange(start, start + size)] ^= rng.randrange(1, 256)
        cases.append((f"flip{k}", bytes(flipped)))
    cases.append(("cut", raw[: rng.randrange(spans[2][1], spans[3][0])]))
    _, metadata, messages, _ = base
    out = list(messages)
    index = rng.randrange(len(out))
    topic, t_us, body = out[index]
    out[index] = (topic, t_us, {**body, "step": 10**9} if isinstance(body, dict) else body)
    rewrite(base[0] / "crafted.mcap", metadata, out)
    cases.append(("crafted", (base[0] / "crafted.mcap").read_bytes()))
    return cases


def test_the_cli_process_on_a_seeded_sample(base):
    rng = random.Random(31)
    for name, raw in _sample(base, rng):
        path = write(base, f"cli-{name}.mcap", raw)
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "twin", "replay", str(path)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        took = time.monotonic() - start
        check(done.returncode, done.stdout, done.stderr, path)
        assert done.returncode in (2, 3), (name, done.stdout, done.stderr)
        assert took < CASE_LIMIT_S, (name, took)


def test_report_the_slowest_case():
    """Not a check: the slowest in-process case of this run, for the log (``-s``)."""
    codes = ", ".join(f"exit {c}: {n}" for c, n in sorted(_codes.items()))
    print(f"\nfuzzed recordings: {_worst['cases']} cases ({codes}), slowest {_worst['s']:.2f} s")
