"""The trio driver: one loop thread drives every connection with tasks (the trio faces, the
blocking server, and a `RemotingClient` with ``io="loop"``): its calls, their deadlines and
GO_AWAY, its connections by address, and one socket's reader, sender and raw I/O."""
