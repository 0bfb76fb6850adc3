"""The sans-I/O bookkeeping of the messaging features: streams, acknowledged delivery, held
requests and the queue service's records.

Every module here is plain state with methods that take ``now`` (seconds, the loop's clock)
where time matters; none imports trio, touches a socket or a file, or reads a clock. The
trio layers (`remoting._core._streams`, `remoting._core._receiving._held`,
`remoting.queue`) drive them and do the I/O, as `ResponseTable` and `Outbound` are driven by
the transport.
"""
