"""The sans-I/O bookkeeping the messaging features share: the stream frames' codes, credit
windows, held requests, and the lazy deadline heap that held requests and the queue's
in-flight deliveries keep their due times in.

Every module here is plain state with methods that take ``now`` (seconds, the loop's clock)
where time matters; none imports trio, touches a socket or a file, or reads a clock. The
trio layers (`remoting._core._streams`, `remoting._core._receiving._held`,
`remoting.queue`) drive them and do the I/O, as `ResponseTable` and `Outbound` are driven by
the transport. What only the queue service uses is the queue's (`remoting.queue._sansio`).
"""
