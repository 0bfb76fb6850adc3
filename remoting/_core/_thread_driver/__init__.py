"""The thread driver: a `RemotingClient` (``io="threads"``) driven from its calling threads."""
