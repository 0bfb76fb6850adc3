"""Coverage-guided fuzzing of `codec.FrameDecoder` with atheris (libFuzzer for Python).

    .venv/bin/python tests/fuzz/atheris_decoder.py CORPUS_DIR -atheris_runs=1000000

Each input is a byte stream, decoded whole and in chunks (cut points, and the decoder's
``max_frame_bytes``, drawn from a PRNG seeded by the input's CRC, so a crash file reproduces
exactly). The invariant (`mutations.check_input`): only commands, None or `codec.CodecError`
come out, a CodecError is sticky, and the chunking does not change the result. Anything else
is a crash: libFuzzer writes the input to ``-artifact_prefix`` and exits non-zero.

An empty CORPUS_DIR is seeded with valid frames of both serializations. Half of the mutations
are libFuzzer's own, half are ours (length-field tweaks, JSON token swaps, splices...), so the
header parsers are reached and not only the length checks.
"""

from __future__ import annotations

import os
import random
import sys
import zlib

import atheris  # type: ignore[import-untyped]

# The repository root, so `tests.fuzz.mutations` imports when run as a script.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

with atheris.instrument_imports(include=["codec"]):
    import codec

from tests.fuzz.mutations import (  # noqa: E402
    FRAME_LIMITS,
    check_input,
    chunking,
    mutate,
    seed_frames,
)

SEEDS = seed_frames()
assert "codec" in sys.modules and codec.FrameDecoder is not None


def test_one_input(data: bytes) -> None:
    rng = random.Random(zlib.crc32(data))
    check_input(data, chunking(rng, data), rng.choice(FRAME_LIMITS))


def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    if rng.random() < 0.5:
        mutated: bytes = atheris.Mutate(data, max_size)
        return mutated
    out = mutate(rng, data, SEEDS)
    if rng.random() < 0.2:  # append a frame: multi-frame streams
        out += rng.choice(SEEDS)
    return out[:max_size]


def seed_corpus(directory: str) -> None:
    """Write the seed frames (and a few pairs of them) into an empty corpus directory."""
    os.makedirs(directory, exist_ok=True)
    if os.listdir(directory):
        return
    units = [*SEEDS, *(a + b for a, b in zip(SEEDS, SEEDS[1:], strict=False))]
    for i, unit in enumerate(units):
        with open(os.path.join(directory, f"seed-{i:03d}"), "wb") as f:
            f.write(unit)


def main() -> None:
    for arg in sys.argv[1:]:
        if not arg.startswith("-"):
            seed_corpus(arg)
    atheris.Setup(sys.argv, test_one_input, custom_mutator=custom_mutator)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
