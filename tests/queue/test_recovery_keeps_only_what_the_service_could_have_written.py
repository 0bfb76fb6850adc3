"""Recovery of a data directory tampered with, or damaged where CRCs cannot tell (real files):
records whose offsets are out of place (a segment copied or renamed, a record of another log),
a flipped bit in the length of the newest segment's middle record, files and directories the
service does not name so, and offsets files holding what no client could have committed. The
good records are served, the rest is set aside (never deleted) and named, and nothing of it
can stop the service later."""

from __future__ import annotations

from pathlib import Path

from remoting.queue import QueueService
from remoting.queue._sansio._records import build_record, decode_records, encode_content


def _records(offsets: list[int] | range) -> bytes:
    return b"".join(build_record(o, 1_000, 0, encode_content(None, b"%d" % o)) for o in offsets)


def _topic(data_dir: Path, files: dict[str, bytes]) -> Path:
    directory = data_dir / "topics" / "t"
    directory.mkdir(parents=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory


def _served(service: QueueService) -> list[int]:
    store = service.broker.topics["t"].store
    return [r.offset for r in decode_records(b"".join(store.read(0, 1_000) or []))]


def test_a_record_out_of_place_is_set_aside_with_the_rest_of_its_segment(
        tmp_path: Path) -> None:
    directory = _topic(tmp_path, {f"{0:020d}.log": _records([0, 1, 2, 10**15, 3, 4])})
    with QueueService(tmp_path) as service:
        [problem] = service.problems
        assert problem.kind == "corrupt" and "offset 1000000000000000 where 3" in str(problem)
        assert _served(service) == [0, 1, 2] and service.broker.topics["t"].end == 3
    assert (directory / f"{0:020d}.log.corrupt-{problem.position}").stat().st_size > 0


def test_a_segment_holding_another_log_s_records_is_set_aside(tmp_path: Path) -> None:
    directory = _topic(tmp_path, {f"{0:020d}.log": _records(range(5)),
                                  f"{5:020d}.log": _records(range(100, 105)),
                                  f"{8:020d}.log": _records(range(8, 10))})
    with QueueService(tmp_path) as service:
        assert [p.path.name for p in service.problems] == [f"{5:020d}.log"]
        assert _served(service) == [0, 1, 2, 3, 4, 8, 9]  # a gap where it was
    assert (directory / f"{5:020d}.log.corrupt-0").read_bytes() == _records(range(100, 105))


def test_a_flipped_length_in_the_newest_segment_sets_the_rest_aside_not_away(
        tmp_path: Path) -> None:
    data = bytearray(_records(range(10)))
    one = len(_records([0]))
    data[3 * one] = 0x01  # record 3's length: 16 MiB more, as if cut short by a crash
    _topic(tmp_path, {f"{0:020d}.log": bytes(data)})
    with QueueService(tmp_path) as service:
        [problem] = service.problems
        assert problem.kind == "torn" and problem.set_aside is not None
        assert _served(service) == [0, 1, 2]
    assert problem.set_aside.read_bytes() == bytes(data[3 * one:])  # records 3-9, kept


def test_files_and_directories_the_service_does_not_name_so_are_left_alone(
        tmp_path: Path) -> None:
    directory = _topic(tmp_path, {f"{0:020d}.log": _records(range(3)),
                                  "\u0665.log": _records(range(3, 6)),  # an Arabic-Indic 5
                                  "notes.log": b"an operator's notes"})
    (tmp_path / "topics" / "lost+found").mkdir()
    with QueueService(tmp_path) as service:
        assert set(service.broker.topics) == {"t"} and service.problems == []
        assert _served(service) == [0, 1, 2]
    assert (directory / "notes.log").read_bytes() == b"an operator's notes"


def test_offsets_no_client_could_have_committed_are_dropped(tmp_path: Path) -> None:
    directory = _topic(tmp_path, {f"{0:020d}.log": _records(range(5))})
    (directory / "offsets.json").write_text(
        '{"groups": {"g": -7, "bad name/..": 3, "huge": 99999999999999999999999, "ok": 2, '
        '"past": 9}, "channels": {"c": -3, "../x": 2, "d": 10, "e": 1}}')
    with QueueService(tmp_path) as service:
        topic = service.broker.topics["t"]
        assert topic.groups == {"ok": 2, "past": 5}  # one past the end is at the end
        assert {n: c.queue.cursor for n, c in topic.channels.items()} == {"d": 5, "e": 1}
    with QueueService(tmp_path) as again:  # what was saved at close reads back the same
        assert again.broker.topics["t"].groups == {"ok": 2, "past": 5}
