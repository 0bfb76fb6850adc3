"""The queue service's sans-I/O bookkeeping: its record and entry formats, a channel's queue
and its deliveries in flight, deferred offsets, idempotence keys, grouped acknowledgements,
and a connection's bound on deliveries.

Every module here is plain state with methods that take ``now`` (seconds, the loop's clock)
where time matters; none imports trio, touches a socket or a file, or reads a clock (a test
proves it). The broker (`remoting.queue._broker`) and the client drive them and do the I/O.
"""
