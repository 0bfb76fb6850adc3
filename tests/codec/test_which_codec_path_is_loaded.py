"""Which implementation of the codec runs, compiled or pure Python, and that both give the same.

Each case runs in a fresh interpreter, since the choice is made once, at import: with
``TRIO_REMOTING_PURE_PYTHON=1`` the codec uses its Python functions only; without it, the
compiled fast path wherever it was built (an editable install or a wheel built with a C
compiler), and never a build that is stale against the source beside it.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import codec
from codec import _command, _decoder, _encoder, _header_binary, _header_json

PROBE = """
import json
import codec
from codec import _command, _decoder, _encoder, _header_binary, _header_json, _native
swapped = {
    "new_command": _command.new_command is not _command.python_new_command,
    "decode_json_header": _header_json.decode_json_header
        is not _header_json.python_decode_json_header,
    "encode_json_header": _header_json.encode_json_header
        is not _header_json.python_encode_json_header,
    "decode_binary_header": _header_binary.decode_binary_header
        is not _header_binary.python_decode_binary_header,
    "encode_binary_header": _header_binary.encode_binary_header
        is not _header_binary.python_encode_binary_header,
    "encode_frame_parts": _encoder.encode_frame_parts is not _encoder.python_encode_frame_parts,
    "next_command": codec.FrameDecoder.next_command is not _decoder.python_next_command,
}
# a corpus through the whole codec: frames out, commands back, errors
results = []
for st in (codec.SerializeType.JSON, codec.SerializeType.ROCKETMQ):
    for i, (ext, remark, body) in enumerate([
        (None, None, None), ({"topic": "T", "queueId": "3"}, None, b"x" * 128),
        ({"k": None, "q": 'a"b'}, "r\\u00e9mark", b""), ({"\\u2028": "\\x85"}, "\\x7f", None),
        ({"big": "v" * 70000}, None, b"y" * 70000),
    ]):
        cmd = codec.RemotingCommand(code=100 + i, opaque=7 + i, ext_fields=ext, remark=remark,
                                    body=body, serialize_type=st)
        frame = codec.encode_frame(cmd)
        decoder = codec.FrameDecoder(max_header_bytes=1 << 20)
        decoder.feed(frame[:5]); decoder.feed(frame[5:] + frame)
        back = [decoder.next_command(), decoder.next_command(), decoder.next_command()]
        results.append([frame.hex()[:400], len(frame)] + [repr(c) for c in back])
for bad in (b"\\x00\\x00\\x00\\x0c\\x00\\x00\\x00\\x04{\\"a\\"}",
            b"\\x00\\x00\\x00\\x05\\x01\\x00\\x00\\x01x"):
    try:
        codec.decode_frame(bad)
    except codec.CodecError as exc:
        results.append([type(exc).__name__, str(exc)])
print(json.dumps({"compiled": _native.COMPILED, "status": _native.STATUS, "swapped": swapped,
                  "results": results}))
"""


def probe(**env: str) -> dict[str, object]:
    run_env = {k: v for k, v in os.environ.items() if k != "TRIO_REMOTING_PURE_PYTHON"}
    run_env.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=run_env, capture_output=True,
                         text=True, check=True, timeout=120).stdout
    result: dict[str, object] = json.loads(out)
    return result


def built_extension() -> Path | None:
    folder = Path(codec.__file__).parent
    found = sorted(folder.glob("_speedups.*.so")) + sorted(folder.glob("_speedups.*.pyd"))
    return found[0] if found else None


def test_pure_python_is_forced_by_the_environment_variable() -> None:
    pure = probe(TRIO_REMOTING_PURE_PYTHON="1")
    assert pure["compiled"] is False
    assert "TRIO_REMOTING_PURE_PYTHON" in str(pure["status"])
    assert not any(dict(pure["swapped"]).values())  # type: ignore[call-overload]


def test_the_compiled_path_is_used_wherever_it_was_built() -> None:
    default = probe()
    swapped = dict(default["swapped"])  # type: ignore[call-overload]
    if built_extension() is None:
        assert default["compiled"] is False, default["status"]
        assert "not built" in str(default["status"])
        assert not any(swapped.values())
        return
    # built (an editable install compiles in place): it must be loaded, and fresh
    assert default["compiled"] is True, default["status"]
    assert str(default["status"]).startswith("compiled")
    assert all(swapped.values()), swapped
    assert probe(TRIO_REMOTING_PURE_PYTHON="0")["compiled"] is True


def test_both_paths_give_identical_results() -> None:
    assert probe()["results"] == probe(TRIO_REMOTING_PURE_PYTHON="1")["results"]


def test_a_compiled_function_shows_its_python_twins_docstring_and_signature() -> None:
    """help(), inspect and the API reference show the specification on either path."""
    for compiled, python in (
        (codec.encode_frame_parts, _encoder.python_encode_frame_parts),
        (codec.FrameDecoder.next_command, _decoder.python_next_command),
        (_command.new_command, _command.python_new_command),
        (_header_json.decode_json_header, _header_json.python_decode_json_header),
        (_header_json.encode_json_header, _header_json.python_encode_json_header),
        (_header_binary.decode_binary_header, _header_binary.python_decode_binary_header),
        (_header_binary.encode_binary_header, _header_binary.python_encode_binary_header),
    ):
        assert compiled.__name__ == python.__name__
        assert inspect.getdoc(compiled) == inspect.getdoc(python)
        assert inspect.getdoc(compiled)
        got = inspect.signature(compiled).parameters.values()
        want = inspect.signature(python).parameters.values()
        assert [(p.name, p.default) for p in got] == [(p.name, p.default) for p in want]
