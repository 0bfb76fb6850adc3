"""The thread driver: a `RemotingClient` (``io="threads"``) driven from its calling threads,
with one background reader; the server's requests run on a loop started when one arrives."""
