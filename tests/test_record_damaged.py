"""Recordings that are damaged, crafted or cut short (issue 31, items 6 and 9): one line naming
the file, where and what was expected, never a traceback or a replay without end; a file cut
short replays what it has and says so; after a full disk the counts are what reads back."""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from recording_cases import (
    base_messages,
    chunk_records,
    chunks,
    message_offsets,
    record_run,
    reseal,
    rewrite,
)
from twin.hardware.emulator.testing import wait_until

from twin.record import McapWriter, RecordingError, read_recording, replay
from twin.record.replay import SPARE_STEPS, STEPS_PER_MESSAGE
from twin.robot import JointCommand

HOLD = JointCommand(q_des=np.zeros(6), kp=np.full(6, 60.0), kd=np.full(6, 2.0))


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """(metadata, messages, path of the deterministic rewrite)."""
    folder = tmp_path_factory.mktemp("damaged")
    record_run(folder / "run.mcap")
    metadata, messages = base_messages(folder / "run.mcap")
    return metadata, messages, rewrite(folder / "base.mcap", metadata, messages)


def twin_replay(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "twin", "replay", *map(str, args)],
        capture_output=True, text=True, timeout=300, cwd=cwd,
    )  # fmt: skip


def one_line(done: subprocess.CompletedProcess) -> str:
    """The single stderr line of a refused file (exit 2), without the sim's banner."""
    lines = [line for line in done.stderr.splitlines() if "pybullet build time" not in line]
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1, lines
    return lines[0]


def test_the_rewritten_base_replays_exactly(base):
    path = base[2]
    assert len(chunks(path)) >= 4
    report = replay(path)
    assert report.reproduced and not report.partial
    assert report.divergences["joints"].compared == 121


def test_a_flipped_byte_in_any_chunk_names_that_chunk(base, tmp_path):
    _, _, path = base
    data = path.read_bytes()
    for k, (at, start, size) in enumerate(chunks(path)):
        bad = bytearray(data)
        bad[start + size // 2] ^= 0x01
        damaged = tmp_path / f"flip{k}.mcap"
        damaged.write_bytes(bytes(bad))
        with pytest.raises(RecordingError, match=rf"damaged at byte {at}: expected a Chunk"):
            read_recording(damaged)
    line = one_line(twin_replay(damaged))
    assert line.startswith(f"twin replay: '{damaged}': damaged at byte {at}: expected a Chunk")


@pytest.mark.parametrize(
    ("field", "offset", "value", "expected"),
    [
        ("uncompressed size", 16, 2**63, "an uncompressed size of at most"),
        ("uncompressed size", 16, 7, "7 bytes of records, found"),
        ("records length", None, 2**40, "the chunk's records of 1099511627776 bytes, but the"),
    ],
)
def test_absurd_chunk_sizes_are_bounded_by_the_file(base, tmp_path, field, offset, value, expected):
    _, _, path = base
    data = bytearray(path.read_bytes())
    at, start, _ = chunks(path)[1]
    where = at + 9 + offset if offset is not None else start - 8
    data[where : where + 8] = value.to_bytes(8, "little")
    damaged = tmp_path / "sizes.mcap"
    damaged.write_bytes(bytes(data))
    with pytest.raises(RecordingError, match=r"damaged at byte \d+: expected") as e:
        read_recording(damaged)
    assert expected in str(e.value)


def test_an_unknown_record_and_a_length_past_the_end_of_a_whole_file_are_damage(base, tmp_path):
    _, _, path = base
    data = bytearray(path.read_bytes())
    at = chunks(path)[2][0]
    data[at] = 0x42
    (tmp_path / "op.mcap").write_bytes(bytes(data))
    with pytest.raises(RecordingError, match=rf"byte {at}: expected an MCAP record opcode"):
        read_recording(tmp_path / "op.mcap")
    data[at] = 0x06
    data[at + 1 : at + 9] = (len(data)).to_bytes(8, "little")
    (tmp_path / "len.mcap").write_bytes(bytes(data))  # still ends with the magic: not a cut
    with pytest.raises(RecordingError, match=rf"byte {at}: expected a record within the file"):
        read_recording(tmp_path / "len.mcap")


def test_a_length_past_the_end_of_a_file_without_its_closing_magic_reads_as_a_cut(base, tmp_path):
    """The documented limit (found by the long fuzz run): with the closing magic gone too, a
    chunk whose length runs past the end cannot be told from a cut; what came before it is read
    and the replay says partial, never 'reproduced'."""
    _, _, path = base
    data = bytearray(path.read_bytes())
    at = chunks(path)[1][0]
    data[at + 5] ^= 0x01  # the chunk's length grows by 4 GiB: past the end of the file
    data[-1] ^= 0x01
    (tmp_path / "both.mcap").write_bytes(bytes(data))
    rec = read_recording(tmp_path / "both.mcap")
    assert rec.cut.offset == at and len(rec.messages) == len(message_offsets(path)) - sum(
        1 for o in message_offsets(path).values() if o >= at
    )
    assert replay(tmp_path / "both.mcap").partial


def test_damage_inside_a_resealed_chunk_names_the_chunk(base, tmp_path):
    _, _, path = base
    data = path.read_bytes()
    chunk = chunks(path)[1]
    records = bytearray(chunk_records(data, chunk))
    records[0] = 0x07  # a MessageIndex inside a chunk: the CRC is right, the content is not
    (tmp_path / "inner.mcap").write_bytes(reseal(data, chunk, bytes(records)))
    with pytest.raises(RecordingError, match=rf"byte {chunk[0]}: expected a Chunk: a Schema"):
        read_recording(tmp_path / "inner.mcap")
    records = chunk_records(data, chunk)[:-3]  # the last record cut inside the chunk
    (tmp_path / "short.mcap").write_bytes(reseal(data, chunk, records))
    with pytest.raises(RecordingError, match="expected a Chunk: a record within the chunk"):
        read_recording(tmp_path / "short.mcap")


def _with(messages, index, change):
    out = list(messages)
    topic, t_us, body = out[index]
    out[index] = (topic, t_us, change(json.loads(json.dumps(body))))
    return out


def _set(key, value):
    def change(body):
        body[key] = value
        return body

    return change


def _drop(key):
    def change(body):
        del body[key]
        return body

    return change


def _first(messages, topic, n=0):
    """The index of the ``n``-th message on ``topic`` (from 0)."""
    return [i for i, (t, _, _) in enumerate(messages) if t == topic][n]


CASES = [  # (topic, change, what the one line says)
    ("/robot/state", _drop("q"), "expected a field 'q', found none"),
    ("/robot/state", _set("q", [0.0] * 5), "q: expected 6 items, found 5"),
    ("/robot/state", _set("qd", "fast"), "qd: expected an array, found 'fast'"),
    ("/robot/state", _set("t_us", -1), "t_us: expected an integer in [0, "),
    ("/robot/state", _set("step", 1e9), "step: expected an integer, found 1000000000.0"),
    ("/robot/state", _set("step", 2**64), "step: expected an integer in [0, 9223372036854775807]"),
    ("/robot/state", _set("health", True), "health: expected an integer, found True"),
    ("/robot/state", _set("wrench", [1, 2]), "wrench: expected null or object, found [1, 2]"),
    ("/robot/state", _set("q", [10**400] * 6), "q[0]: expected a number within the float"),
    ("/robot/command", _set("accepted", "yes"), "accepted: expected true or false"),
    ("/robot/call", _set("args", [1]), "args: expected an object, found [1]"),
    ("/tf", lambda body: [body], "the message: expected an object"),
]


@pytest.mark.parametrize(("topic", "change", "expected"), CASES)
def test_a_malformed_field_is_one_line_naming_the_message(base, tmp_path, topic, change, expected):
    metadata, messages, _ = base
    index = _first(messages, topic, 3 if topic == "/robot/state" else 0)
    path = rewrite(tmp_path / "field.mcap", metadata, _with(messages, index, change))
    with pytest.raises(RecordingError) as e:
        read_recording(path)
    offset = message_offsets(base[2])[index]  # the same chunk as in the base file
    text = str(e.value)
    assert f"'{path}': message {index} ({topic}, chunk at byte {offset}): " in text, text
    assert expected in text, text


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{", "expected JSON text (JSONDecodeError"),
        (b"\xff\xfe{}", "expected JSON text"),
        (b"[" * 200_000 + b"]" * 200_000, "expected JSON text (RecursionError"),
    ],
)
def test_a_message_that_is_not_json_is_one_line(base, tmp_path, body, expected):
    metadata, messages, _ = base
    index = _first(messages, "/robot/command")
    out = list(messages)
    out[index] = (out[index][0], out[index][1], body)
    path = rewrite(tmp_path / "text.mcap", metadata, out)
    with pytest.raises(RecordingError, match=rf"message {index} \(/robot/command") as e:
        read_recording(path)
    assert expected in str(e.value)


def test_a_crafted_step_counter_is_refused_at_once(base, tmp_path):
    metadata, messages, _ = base
    stepped = ("/robot/state", "/robot/command", "/robot/call", "/events")
    last = max(i for i, (t, _, _) in enumerate(messages) if t in stepped)
    crafted = rewrite(tmp_path / "1e9.mcap", metadata, _with(messages, last, _set("step", 10**9)))
    counted = sum(t in stepped for t, _, _ in messages)
    bound = STEPS_PER_MESSAGE * counted + SPARE_STEPS
    with pytest.raises(RecordingError, match=rf"step counter 1000000000; expected at most {bound}"):
        replay(crafted)
    back = _with(messages, last, _set("step", 3))  # the final read, at step 3
    with pytest.raises(RecordingError, match=rf"message {last} .*step 3; expected no less than"):
        replay(rewrite(tmp_path / "back.mcap", metadata, back))
    line = one_line(twin_replay(crafted))
    assert "step counter 1000000000" in line


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_set("call", "close"), "call 'close'; expected one of ['reset', "),
        (_set("call", "__init__"), "call '__init__'; expected one of"),
        (
            _set("args", {"q": [1e300] * 6}),
            "expected finite arguments within +-1e+06, found 1e+300",
        ),
        (_set("args", {"": 10**400}), "within +-1e+06, found 100000000000000000000..."),
        (_set("args", {"force": [float("nan")]}), "within +-1e+06, found nan"),
        (_set("args", {"q": [0.1] * 5}), "the sim refused it (ValueError"),
        (_set("args", {"args": "x"}), "args.args: expected a list"),
    ],
)
def test_a_crafted_call_is_refused_naming_its_message(base, tmp_path, change, expected):
    metadata, messages, _ = base
    index = _first(messages, "/robot/call")
    path = rewrite(tmp_path / "call.mcap", metadata, _with(messages, index, change))
    with pytest.raises(RecordingError, match=rf"message {index} \(/robot/call") as e:
        replay(path)
    assert expected in str(e.value)


def test_an_accepted_command_the_sim_refuses_names_its_message(base, tmp_path):
    metadata, messages, _ = base
    index = _first(messages, "/robot/command")
    nan = _with(messages, index, _set("kp", [float("nan")] * 6))
    with pytest.raises(RecordingError, match=rf"message {index} .*the sim refused it"):
        replay(rewrite(tmp_path / "nan.mcap", metadata, nan))
    empty = _with(messages, index, _set("q_des", None))
    with pytest.raises(RecordingError, match="an accepted command without numbers"):
        replay(rewrite(tmp_path / "null.mcap", metadata, empty))


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"physics_dt": 1e-9}, "physics_dt: expected a number in [1e-05, 0.1], found 1e-09"),
        ({"control_period_s": 1.0, "physics_dt": 1e-5}, "expected at most 100 physics steps"),
        ({"seed": "two"}, "seed: expected a number in"),
        ({"model": "x"}, "unknown robot option 'model'"),
        ({"scene": "no-such-scene"}, "the sim refused the recorded options"),
        ([1, 2], "robot_options: expected an object"),
    ],
)
def test_crafted_robot_options_are_refused(base, tmp_path, options, expected):
    metadata, messages, _ = base
    path = rewrite(tmp_path / "opt.mcap", {**metadata, "robot_options": options}, messages)
    with pytest.raises(RecordingError) as e:
        replay(path)
    assert expected in str(e.value) and str(path) in str(e.value)


def test_metadata_that_is_not_json_is_one_line(base, tmp_path):
    metadata, messages, _ = base
    path = rewrite(tmp_path / "meta.mcap", {**metadata, "seed": b"{"}, messages)
    with pytest.raises(RecordingError, match=r"metadata 'twin' at byte \d+, key 'seed': expected"):
        read_recording(path)


def test_a_gui_recording_replays_headless(base, tmp_path):
    metadata, messages, _ = base
    options = {**metadata["robot_options"], "gui": True}
    path = rewrite(tmp_path / "gui.mcap", {**metadata, "robot_options": options}, messages)
    assert replay(path).reproduced


def test_a_nan_in_a_recorded_state_is_a_divergence_not_a_reproduction(base, tmp_path):
    metadata, messages, _ = base
    index = _first(messages, "/robot/state", 10)
    q = list(messages[index][2]["q"])
    q[2] = float("nan")
    report = replay(rewrite(tmp_path / "nan.mcap", metadata, _with(messages, index, _set("q", q))))
    assert not report.reproduced
    assert report.divergences["joints"].first_t_us == messages[index][1]


# ------------------------------------------------------------------------------- cut short
def test_a_file_cut_inside_a_chunk_replays_what_it_has_and_says_partial(base, tmp_path):
    _, messages, path = base
    data = path.read_bytes()
    at, start, size = chunks(path)[-2]
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: start + size // 2])
    rec = read_recording(cut)
    assert rec.truncated and not rec.count_exact
    kept = len(rec.messages)
    assert [m.data for m in rec.messages] == [b for _, _, b in messages[:kept]]
    true_m = kept + sum(1 for o in message_offsets(path).values() if o == at)
    assert abs(rec.expected_messages - true_m) <= 0.15 * true_m  # estimated from the chunk size
    report = replay(cut)
    assert report.reproduced and report.partial
    t_cut = rec.messages[-1].t_us
    assert report.partial_line == (
        f"partial: {kept} of ~{rec.expected_messages} messages, cut at t = {t_cut * 1e-6:.3f} s"
    )
    done = twin_replay(cut)
    assert done.returncode == 3, done.stderr
    assert (
        done.stdout.strip().splitlines()[-1]
        == f"{report.partial_line}; the part replayed reproduced"
    )
    assert "Traceback" not in done.stderr


def test_a_file_cut_in_its_summary_has_every_message_and_says_so_exactly(base, tmp_path):
    _, messages, path = base
    data = path.read_bytes()
    cut = tmp_path / "summary.mcap"
    cut.write_bytes(data[:-40])  # the footer gone: the data and the DataEnd record are whole
    rec = read_recording(cut)
    assert rec.truncated and rec.count_exact
    assert len(rec.messages) == rec.expected_messages == len(messages)
    assert rec.partial_line().startswith(f"partial: {len(messages)} of {len(messages)} messages")


def test_a_file_cut_before_any_state_is_one_line(base, tmp_path):
    _, _, path = base
    cut = tmp_path / "early.mcap"
    cut.write_bytes(path.read_bytes()[: chunks(path)[0][0] + 30])
    line = one_line(twin_replay(cut))
    assert "has no /robot/state messages to replay (the file is cut short at byte" in line


# ------------------------------------------------------------------------------ full disk
class PartialDisk(io.RawIOBase):
    """A file on a disk with ``budget`` bytes free, as the kernel treats one: a write takes what
    fits (a short write), the next fails with ENOSPC; shrinking the file needs no space."""

    def __init__(self, path, budget: int) -> None:
        self._file = open(path, "wb", buffering=0)  # noqa: SIM115 - closed in close()
        self.name = str(path)
        self._free = budget

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if self._free <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.name)
        taken = self._file.write(bytes(data[: self._free]))
        self._free -= taken
        return taken

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def truncate(self, size=None) -> int:
        old = self._file.seek(0, io.SEEK_END)
        new = self._file.truncate(size)
        self._free += old - new
        return new

    def close(self) -> None:
        self._file.close()
        super().close()


def _counts(path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in read_recording(path).messages:
        counts[m.topic] = counts.get(m.topic, 0) + 1
    return counts


@pytest.mark.parametrize("budget", [9_000, 40_000, 120_000])
def test_after_a_full_disk_the_written_count_is_what_reads_back(tmp_path, budget):
    from twin.backends import open_robot
    from twin.record import RecordingRobot

    path = tmp_path / "full.mcap"
    writer = McapWriter(PartialDisk(path, budget), {"backend": "sim"}, flush_interval_s=0.005)
    robot = RecordingRobot(open_robot("sim", seed=0), writer)
    for k in range(400):
        robot.read()
        robot.write(HOLD)
        robot.step()
        if k % 50 == 0:
            robot.event("test", "tick", k=k)
        if k % 25 == 24:  # let a commit land between batches (until the disk is full)
            before = sum(writer.written.values())
            wait_until(lambda b=before: sum(writer.written.values()) > b or writer.error, 30)
    robot.close()
    with pytest.raises(RecordingError, match=r"were not written \(OSError: \[Errno 28\]") as e:
        writer.close()
    back = _counts(path)
    assert dict(writer.written) == back  # per topic, exactly
    assert writer.dropped > 0
    if budget > 9_000:  # commits landed before the disk filled
        assert sum(back.values()) > 0
    written = sum(back.values())
    assert f"; {written} were" in str(e.value)
    assert f"{writer.dropped} messages were not written" in str(e.value)
    assert os.path.getsize(path) <= budget


FSIZE_CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
    from twin.record import RecordingError, open_recorded
    robot = open_recorded(sys.argv[1], "sim", seed=1)
    for _ in range(int(sys.argv[3])):
        robot.read()
        robot.step()
    try:
        robot.close()
        error = None
    except RecordingError as e:
        error = str(e)
    w = robot.recording
    print(json.dumps({"written": dict(w.written), "dropped": w.dropped, "error": error}))
    """
)


def test_a_real_file_size_limit_leaves_exact_counts_and_whole_chunks(tmp_path):
    """The kernel's own refusal (RLIMIT_FSIZE: EFBIG part-way through a write), in a child."""
    path = tmp_path / "limited.mcap"
    done = subprocess.run(
        [sys.executable, "-c", FSIZE_CHILD, str(path), "60000", "1500"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "File too large" in out["error"] and out["dropped"] > 0
    assert _counts(path) == out["written"]
    rec = read_recording(path)
    assert rec.truncated and os.path.getsize(path) <= 60000
    assert rec.cut.offset == os.path.getsize(path)  # cut back to a whole commit: no half chunk
