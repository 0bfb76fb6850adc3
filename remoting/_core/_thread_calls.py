"""`invoke_sync` from a plain thread without the hop into the event loop's thread.

The blocking face normally hands every call to the loop (`Invoker.submit_from_thread`): a
wake-up of the loop's thread, a scheduling pass, then the send. For the common case (a live
plain-TCP connection with nothing queued) the calling thread can do the send itself:

- the future is registered in the response table and the frame written to the socket while
  holding the connection's write lock, which every loop-side write also takes, so a frame is
  never interleaved with another and the socket is never detached mid-send; registration
  happens before the bytes leave, so the response always finds its future;
- the table tolerates these inserts from another thread (single dict and heap operations,
  atomic under the GIL; no compaction off the loop), and a connection that closes afterwards
  still fails the call (its entries are collected after the socket was detached under the
  same lock);
- the loop's precise timer is asked to wake earlier only when this call's deadline comes
  before the one it sleeps to (rare: deadlines of equal timeouts only grow).

Anything else (no connection yet, queued frames, TLS) returns None and the caller takes the
usual path. A large body is sent as (head, body) pieces with one ``sendmsg``, as by the loop.
As RocketMQ's ``invokeSync``, these calls take no in-flight permit: each one already holds its
thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from codec import CodecError, RemotingCommand, encode_frame_parts, next_opaque

if TYPE_CHECKING:
    from ._endpoint import Endpoint
    from ._future import ResponseFuture

__all__ = ["try_invoke_sync_from_thread"]


def try_invoke_sync_from_thread(ep: Endpoint, target: object, request: RemotingCommand,
                                timeout: float) -> ResponseFuture | None:
    """Send ``request`` from the calling thread if that is safe now; return its future.

    Returns None when the usual path must be taken; nothing was sent or registered then.
    """
    clock = ep.clock
    if type(target) is not str or clock is None or ep.closed:
        return None
    conn = ep.channels.get(target)
    if conn is None or conn.closed or conn._raw is None:
        return None
    opaque = request.opaque
    if opaque in ep.table.entries:
        opaque = request.opaque = next_opaque()  # the same command sent twice: keep opaques unique
    try:
        frame = encode_frame_parts(request)  # a large body stays apart: sendmsg, no copy
    except (CodecError, TypeError):
        return None  # the usual path reports it
    if request.opaque != opaque:  # another thread sending the same command changed it
        return None
    fut = ep.new_future(target, request, timeout, "sync", threaded=True)
    fut.opaque = opaque  # the one in the frame, whatever request.opaque is now
    fut.conn = conn
    fut.addr = conn.remote_addr
    fut.deadline = clock.current_time() + timeout
    outcome = conn.send_from_thread(frame, lambda: ep.table.add_from_thread(fut))
    if outcome is None:
        return None
    ep.count_sent_from_thread(request.code)
    try:
        if outcome == "queued":  # the socket took part of it: the writer sends the rest
            ep.inbox.post(lambda _: conn.kick_writer(), None)
        scope = ep._timer_scope
        if ep.config.precise_timeouts and (scope is None or fut.deadline < scope.deadline):
            ep.inbox.post(lambda _: ep._arm_timer(fut.deadline), None)
    except RuntimeError:  # the loop ended meanwhile: its shutdown fails the call
        pass
    return fut
