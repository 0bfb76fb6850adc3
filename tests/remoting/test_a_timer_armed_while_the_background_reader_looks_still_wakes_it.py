"""The background reader ends the calls nobody waits for at their deadlines (`arm`). A call
registered while the reader is between reading the next deadline and going to sleep must
still wake it at its own deadline, not at the one the reader read (or never, when it read
none). The race is made deterministic: the duties arm a timer from inside `next_timer`, the
exact moment of the gap."""

from __future__ import annotations

import math
import threading
from time import monotonic

from remoting._core._thread_driver._background_reader import BackgroundReader

DUE_IN = 0.05


class RacingDuties:
    """No timer, until one is armed while the reader asks for the next (a call sent then)."""

    def __init__(self) -> None:
        self.reader: BackgroundReader | None = None
        self.due = math.inf
        self.raced = False
        self.fired = threading.Event()

    def next_timer(self) -> float:
        due = self.due  # what the reader sees: nothing due
        if not self.raced and self.reader is not None:
            self.raced = True
            self.due = monotonic() + DUE_IN  # a call registered just after the reader looked
            self.reader.arm(self.due)
        return due

    def on_timer(self, now: float) -> None:
        if now >= self.due:
            self.due = math.inf
            self.fired.set()


def test_a_timer_armed_while_the_reader_reads_the_next_deadline_fires_on_time() -> None:
    duties = RacingDuties()
    reader = BackgroundReader("test-background-reader", duties)
    duties.reader = reader
    reader.start()
    try:
        assert duties.fired.wait(5), "the timer armed in the gap never fired"
        assert duties.raced
    finally:
        reader.stop()
