"""The demo service: a scoring service over an in-memory feature table.

Every user id in ``[0, USERS)`` has three synthetic features (age, tenure, monthly spend) and a
precomputed churn score. Two request codes serve the same table:

- `SCORE` (one row per request): the body is a user id as text (``b"42"``), the reply body
  the score as text (``repr(float)``, so it parses back to the very same float). An unknown
  id gets ``QUERY_NOT_FOUND``.
- `SCORE_BATCH` (a `processors.BatchProcessor`): an Arrow batch with a ``user_id`` column
  comes back with a ``score`` column appended (null for unknown ids).

`FeatureTable.score_of` is the local computation the demo checks the service against.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import numpy as np

from codec import RemotingCommand, ResponseCode
from processors import BatchProcessor, RequestProcessor

if TYPE_CHECKING:
    from processors import RequestContext

__all__ = ["SCORE", "SCORE_BATCH", "USERS", "FeatureTable", "ScoreBatchProcessor",
           "ScoreProcessor", "register"]

SCORE: Final = 3001
SCORE_BATCH: Final = 3002
USERS: Final = 100_000
SEED: Final = 20261121


class FeatureTable:
    """Synthetic features and scores for ``users`` users (deterministic for a seed)."""

    def __init__(self, users: int = USERS, seed: int = SEED) -> None:
        rng = np.random.default_rng(seed)
        self.age = rng.integers(18, 80, users)
        self.tenure_months = rng.integers(0, 120, users)
        self.monthly_spend = rng.lognormal(3.0, 1.0, users)
        logit = (0.03 * (self.age - 45) - 0.02 * self.tenure_months
                 + 0.4 * np.log1p(self.monthly_spend) - 1.2)
        self.scores: np.ndarray[Any, np.dtype[np.float64]] = 1.0 / (1.0 + np.exp(-logit))
        # Replies are precomputed: the per-row service does a list lookup and nothing else.
        self.score_bodies = [repr(float(s)).encode() for s in self.scores]

    def __len__(self) -> int:
        return len(self.scores)

    def score_of(self, user_id: int) -> float | None:
        """The local computation: the score of ``user_id``, or None if unknown."""
        return float(self.scores[user_id]) if 0 <= user_id < len(self.scores) else None


class ScoreProcessor(RequestProcessor):
    """`SCORE`: one user id in, its score out.

    A sync processor on a small pool: the requests of each read reach the pool in one hand-off
    and their results come back to the loop together, so a cheap lookup costs about as much
    here as on the event loop, and a slow one never blocks the loop.
    """

    def __init__(self, table: FeatureTable) -> None:
        self.bodies = table.score_bodies

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            user_id = int(request.body or b"")
            if user_id < 0:
                raise IndexError(user_id)
            body = self.bodies[user_id]
        except (ValueError, IndexError):
            return RemotingCommand.create_response(
                ResponseCode.QUERY_NOT_FOUND, f"unknown user id {request.body!r}")
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = body
        return response


class ScoreBatchProcessor(BatchProcessor):
    """`SCORE_BATCH`: appends a ``score`` column for the batch's ``user_id`` column."""

    def __init__(self, table: FeatureTable) -> None:
        self.scores = table.scores

    def process_batch(self, ctx: RequestContext, batch: Any) -> Any:
        import pyarrow as pa

        ids = batch.column("user_id").to_numpy(zero_copy_only=False)
        known = (ids >= 0) & (ids < len(self.scores))
        scores = self.scores[np.where(known, ids, 0)]
        return batch.append_column("score", pa.array(scores, mask=~known))


def register(server: Any, table: FeatureTable | None = None) -> FeatureTable:
    """Register both processors on ``server``; return the table they serve."""
    table = table or FeatureTable()
    server.register_processor(SCORE, ScoreProcessor(table), threads=2)
    server.register_processor(SCORE_BATCH, ScoreBatchProcessor(table), threads=2)
    return table
