"""`BusServer`: a bus server's side of the wire, on its server's event loop.

It serves the bus's request codes from clients (REGISTER, UNREGISTER, WINDOW, SEND, REPLY,
CREDIT, HEARTBEAT), routes their messages with the `BusNode` to the consumers of this process
or pushes them (DELIVER) to clients' consumers over their connections, and forgets a client's
consumers as soon as its connection closes.

Theory of operation:
- A message routed to a remote consumer passes its `Outlet` first: pushed now (the window has
  room), queued (bounded), or refused (a send or request fails as RECIPIENT_FAILURE, a publish
  is dropped and counted). Credits from the client (its handler finished messages) admit the
  queued ones, oldest first.
- What the window admits goes to the consumer's ``to_push`` queue, which the loop empties in
  order (`_pump`): messages reach a consumer in the order they were routed. A push waits
  while its connection's outbound queue is over the high water mark (a task waits for room,
  then pumps again), so a client that stops reading makes the server hold at most its
  consumers' windows, whatever credits it sends (`Outlet`: credits never count a message not
  yet handed to the connection).
- Pushes take none of the server's call permits (the windows bound them) and start no task:
  a publish is pushed oneway; a send's or request's push is a request whose answer (the
  client's bus has the message: its receipt) or end (deadline, lost connection) completes it
  by a callback on the loop (`_pushed`), exactly once. A client that stops answering holds
  its own consumers' windows, and no other consumer waits for it.
- A client's send is answered on that receipt, from the callback that completes it (an
  `Answer`: the SEND processor returns at once, suspends nothing and holds no task); a send
  still queued for room in the window at its deadline is answered TIMEOUT then, by a task
  started only for such a send. A client's request is answered the same way when its reply
  comes, which only the connection holding the message may give (`BusNode.answer`), and by
  the server's one reply timer (`_expire_replies`) with TIMEOUT if it did not come in time.
- A client that answers a push with NOT_REGISTERED (its consumer was just unregistered) had
  not got the message: it goes to the next consumer of the address, as do the messages queued
  for a consumer its client unregistered. When a client's connection closes, its consumers
  are removed at once (the host tells the loop, `BusHost.watch_closes`), and what they held
  or were about to get is failed to the senders as RECIPIENT_FAILURE, requests they held
  included: nothing is lost silently.
- All bookkeeping is under the bus lock (`BusNode`); pushes happen on the loop only.
"""

from __future__ import annotations

import math
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from time import monotonic
from typing import TYPE_CHECKING, Final

import trio

from codec import ResponseCode
from processors import AsyncRequestProcessor

from .._errors import RemotingCommandError, RemotingError, RemotingTimeoutError
from .._log import FirstOfEach, log
from .._security._acl import ACCESS_KEY
from .._steps import drive_async
from ._failure import ReplyFailure
from ._message import Message
from ._node import consumer_full, deadline_after, no_handlers, receipt_failure
from ._outlet import Budget, Outlet
from ._remote_consumer import RemoteConsumer
from ._waiter import DELIVERED, Answer, TaskWaiter, send_answers
from ._wire import (
    DEFAULT_MAX_CONSUMERS,
    DEFAULT_MAX_HELD,
    DEFAULT_MAX_HELD_BYTES,
    DEFAULT_MAX_QUEUED,
    DEFAULT_MAX_WAITING,
    DEFAULT_TIMEOUT,
    MAX_CONSUMERS_PER_CONNECTION,
    MAX_DELIVER_MANY,
    MAX_DELIVER_MANY_BYTES,
    BadBusRequest,
    BusCode,
    FailureCode,
    Forbidden,
    bad_request_response,
    consumer_id_of,
    credits_of,
    deliver_command,
    deliver_many_command,
    failure_of,
    failure_response,
    forbidden_response,
    not_registered_response,
    ok_response,
    register_of,
    reply_of,
    reply_response,
    send_of,
    size_of,
    taken_of,
    too_many_waiting_response,
    window_of,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from codec import RemotingCommand
    from processors import RequestContext

    from .._core._receiving._channel_handle import ChannelHandle
    from .._steps import Steps
    from ._host import BusHost
    from ._node import BusNode
    from ._permissions import Operation, PermissionTable
    from ._reply_table import PendingReply
    from ._waiter import Outcome, Waiter
    from ._wire import Kind

__all__ = ["SERVED_CODES", "BusServer", "Pending", "ServerLimits"]

SERVED_CODES: Final = (BusCode.REGISTER, BusCode.UNREGISTER, BusCode.WINDOW, BusCode.SEND,
                       BusCode.REPLY, BusCode.CREDIT, BusCode.HEARTBEAT)
PUBLISH_PUSH_TIMEOUT: Final = DEFAULT_TIMEOUT  # a publish has no deadline of its own
_LOGGED_ADDRESS_CHARS: Final = 100  # a refused address is the peer's text: logged cut short


@dataclass(slots=True, eq=False, kw_only=True)
class Pending:
    """A message on its way to one consumer.

    Attributes:
        here: sent by this process (so its local consumers may take it).
        receipt: a send's sender, waiting for the consumer's bus to have it.
        entry: a request's reply address.
        passed: consumers found unregistered on the way (routing passes them over; None
            until there is one: most messages find their first consumer).
    """

    kind: Kind
    address: str
    body: bytes
    headers: dict[str, str]
    deadline: float | None
    here: bool
    receipt: Waiter | None = None
    entry: PendingReply[Waiter] | None = None
    passed: set[object] | None = None
    charged: Budget | None = None  # the connection whose budget holds it now
    size: int = field(init=False)  # what it counts in a budget: its body and headers

    def __post_init__(self) -> None:
        self.size = size_of(self.body, self.headers)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerLimits:
    """What a bus server holds for its clients (`EventBus` options; docs/bus.md, limits)."""

    max_queued: int = DEFAULT_MAX_QUEUED  # per remote consumer, beyond its window
    max_consumers: int = DEFAULT_MAX_CONSUMERS  # remote consumers, all clients together
    max_held: int = DEFAULT_MAX_HELD  # messages held for one connection's consumers
    max_held_bytes: int = DEFAULT_MAX_HELD_BYTES  # and their body bytes
    max_waiting: int = DEFAULT_MAX_WAITING  # sends and requests of one connection answered


class BusServer(AsyncRequestProcessor):
    """Serves the bus's codes on a server, and pushes to its clients' consumers."""

    def __init__(self, node: BusNode, host: BusHost, limits: ServerLimits,
                 permissions: PermissionTable | None = None) -> None:
        self._node = node
        self._host = host
        self._limits = limits
        self._permissions = permissions
        self._verified = False  # an ACL hook verifies the access keys (once seen, for good)
        self._remote: dict[ChannelHandle, dict[int, RemoteConsumer]] = {}
        self._budgets: dict[ChannelHandle, Budget] = {}  # one per connection with consumers
        # sends and requests waiting for their outcome, per connection (under the bus lock)
        self._waiting: dict[object, int] = {}
        self._refusals = FirstOfEach()  # bad requests logged, per connection and reason
        self._expiry: trio.CancelScope | None = None  # the reply timer's sleep (loop only)
        self._serve: dict[int, Callable[[RequestContext, RemotingCommand],
                                        Awaitable[RemotingCommand | None]]] = {
            BusCode.REGISTER: self._register, BusCode.UNREGISTER: self._unregister,
            BusCode.WINDOW: self._window, BusCode.SEND: self._send, BusCode.REPLY: self._reply,
            BusCode.CREDIT: self._credit, BusCode.HEARTBEAT: self._heartbeat}
        host.watch_closes(self.channel_closed)

    # ------------------------------------------------------------------ requests

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand | None:
        try:
            return await self._serve[request.code](ctx, request)
        except BadBusRequest as exc:
            if self._refusals.first(ctx.channel, (request.code, exc.field or str(exc))):
                log.warning("bus.request_refused", code=request.code, peer=ctx.remote_addr,
                            reason=str(exc))
            return bad_request_response(exc)
        except Forbidden as exc:
            if self._refusals.first(ctx.channel, ("forbidden", exc.operation)):
                log.warning("bus.permission_denied", code=request.code, peer=ctx.remote_addr,
                            access_key=exc.access_key, operation=exc.operation,
                            address=exc.address[:_LOGGED_ADDRESS_CHARS],
                            address_chars=len(exc.address), reason=str(exc))
            return forbidden_response(exc)

    def _permit(self, request: RemotingCommand, operation: Operation, address: str) -> None:
        """Check that the access key that signed ``request`` may do ``operation`` at
        ``address`` (nothing to check without permissions).

        Raises:
            Forbidden: it may not; or the server verifies no access keys (no ACL hook), so
                none can be trusted.
        """
        permissions = self._permissions
        if permissions is None:
            return
        access_key = (request.ext_fields or {}).get(ACCESS_KEY)
        if not self._verified:
            self._verified = self._host.verifies_access_keys()
            if not self._verified:
                raise Forbidden("the bus has address permissions, but its server verifies no "
                                "access keys: register an AclServerRPCHook on it",
                                operation, access_key, address)
        if not permissions.allows(access_key, operation, address):
            who = "a request without an AccessKey" if access_key is None else (
                f"AccessKey {access_key!r}")
            raise Forbidden(f"{who} may not {operation} at address {address!r} (the bus's "
                            "permissions)", operation, access_key, address)

    async def _register(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        registration = register_of(request)
        self._permit(request, "consume", registration.address)
        channel: ChannelHandle = ctx.channel  # type: ignore[assignment]
        node = self._node
        with node.lock:
            mine = self._remote.setdefault(channel, {})
            known = mine.get(registration.consumer_id)
            if known is not None:  # registering again (after a lost connection): idempotent
                if known.address != registration.address:
                    raise BadBusRequest("that consumer id is registered at another address")
                return ok_response()
            if len(mine) >= MAX_CONSUMERS_PER_CONNECTION:
                raise BadBusRequest(f"over {MAX_CONSUMERS_PER_CONNECTION} consumers on one "
                                    "connection")
            limits = self._limits
            if node.remote_consumers >= limits.max_consumers:
                raise BadBusRequest(f"the bus holds {limits.max_consumers} consumers of its "
                                    "clients already (its max_consumers): try again later")
            budget = self._budgets.get(channel)
            if budget is None:
                budget = self._budgets[channel] = Budget(limits.max_held, limits.max_held_bytes)
            target = RemoteConsumer(channel=channel, consumer_id=registration.consumer_id,
                                    address=registration.address, budget=budget,
                                    outlet=Outlet(registration.window, limits.max_queued,
                                                  registration.held),
                                    many=registration.many)
            mine[registration.consumer_id] = target
            node.shared.add(target.address, target)
            node.remote_consumers += 1
        return ok_response()

    def _target(self, ctx: RequestContext, consumer_id: int) -> RemoteConsumer | None:
        """Return the consumer ``consumer_id`` of the requesting connection (lock held)."""
        target = self._remote.get(ctx.channel, {}).get(consumer_id)  # type: ignore[call-overload]
        return target if target is not None and target.registered else None

    async def _unregister(self, ctx: RequestContext, request: RemotingCommand
                          ) -> RemotingCommand:
        consumer_id = consumer_id_of(request)
        with self._node.lock:
            target = self._target(ctx, consumer_id)
        if target is not None:
            self._forget(target)
        return ok_response()

    async def _heartbeat(self, ctx: RequestContext, request: RemotingCommand
                         ) -> RemotingCommand | None:
        # reading it was the point: the connection is not idle (sent oneway by our clients;
        # a peer that asks for an answer gets one rather than its call's timeout)
        return None if request.is_oneway else ok_response()

    async def _credit(self, ctx: RequestContext, request: RemotingCommand
                      ) -> RemotingCommand | None:
        consumer_id, credits = consumer_id_of(request), credits_of(request)
        with self._node.lock:
            target = self._target(ctx, consumer_id)
            admitted = None if target is None else target.outlet.credit(credits, monotonic())
        if target is not None and admitted is not None:
            self._admitted(target, admitted)
        return None if request.is_oneway else ok_response()

    async def _window(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        consumer_id = consumer_id_of(request)
        window, credits = window_of(request)
        with self._node.lock:
            target = self._target(ctx, consumer_id)
            if target is None:
                return not_registered_response()
            admitted = target.outlet.resize(window, credits, monotonic())
        self._admitted(target, admitted)
        return ok_response()

    def _admitted(self, target: RemoteConsumer, admitted: tuple[list[Pending], list[Pending]]
                  ) -> None:
        """Push what credits admitted for ``target``; fail what expired while queued."""
        push, expired = admitted
        for pending in expired:
            self._fail(pending, _waited_too_long(pending))
        if push:
            self._push_later(target, push)

    async def _send(self, ctx: RequestContext, request: RemotingCommand
                    ) -> RemotingCommand | None:
        send = send_of(request)
        self._permit(request, "send", send.address)
        if send.kind == "publish":
            self.publish(send.address, send.body, send.headers, here=False)
            return ok_response()
        deadline = None if send.timeout is None else deadline_after(send.timeout)
        channel = ctx.channel
        with self._node.lock:
            waiting = self._waiting.get(channel, 0)
            if waiting >= self._limits.max_waiting:
                return too_many_waiting_response(waiting)
            self._waiting[channel] = waiting + 1
        # answered from the callback that completes its Answer (maybe already): the
        # processor returns at once, suspending nothing
        answer = Answer(partial(self._answered, ctx, request))
        if send.kind == "send":
            self.route(Pending(kind="send", address=send.address, body=send.body,
                               headers=send.headers, deadline=deadline, here=False,
                               receipt=answer))
            return None
        entry = self._node.expect_reply(answer, deadline, send.address, requester=ctx.channel)
        self._expire_at(deadline)
        self.route(Pending(kind="request", address=send.address, body=send.body,
                           headers=send.headers, deadline=deadline, here=False, entry=entry))
        return None

    def _answered(self, ctx: RequestContext, request: RemotingCommand,
                  outcome: Outcome | None) -> None:
        """Write a send's or request's answer, and count it no longer waiting (any thread,
        the bus lock not held)."""
        channel = ctx.channel
        with self._node.lock:
            left = self._waiting.get(channel, 0) - 1
            if left > 0:
                self._waiting[channel] = left
            else:
                self._waiting.pop(channel, None)
        host = self._host
        if not host.on_loop():
            _write_answer(ctx, request, outcome)
            return
        # on the loop (a receipt or reply read from a consumer's connection): the answers
        # that one read brings leave together
        with host.bundled(channel):  # type: ignore[arg-type]
            _write_answer(ctx, request, outcome)

    def _expire_at(self, deadline: float | None) -> None:
        """Have the timer task answer the requests waiting for a reply at ``deadline`` (a
        `time.monotonic` instant) at the latest (loop only)."""
        if deadline is None:
            return
        at = trio.current_time() + (deadline - monotonic())
        scope = self._expiry
        if scope is None:
            self._expiry = trio.CancelScope(deadline=at)
            self._host.spawn(self._expire_replies)
        elif at < scope.deadline:
            scope.deadline = at

    async def _expire_replies(self) -> None:
        """Answer TIMEOUT to clients' requests whose reply did not come by their deadline
        (one task, sleeping until the earliest)."""
        try:
            while True:
                scope = self._expiry
                assert scope is not None
                with scope:
                    await trio.sleep_forever()
                deadline = self._node.expire()
                self._expiry = trio.CancelScope(
                    deadline=math.inf if deadline is None
                    else trio.current_time() + (deadline - monotonic()))
        finally:
            self._expiry = None

    def sending(self, address: str, body: bytes, headers: dict[str, str],
                deadline: float | None, waiter: Waiter, *, here: bool) -> Steps[None]:
        """Route a send to one consumer of ``address`` and wait (with ``waiter``) until the
        consumer's bus has it (steps; ``here``: sent by this process).

        Raises:
            ReplyFailure: it failed (NO_HANDLERS, RECIPIENT_FAILURE), or was not taken by
                ``deadline`` (TIMEOUT).
        """
        failure = self.route(Pending(kind="send", address=address, body=body, headers=headers,
                                     deadline=deadline, here=here, receipt=waiter))
        if failure is None:
            yield waiter.until(deadline)
            failure = receipt_failure(self._node, waiter, address)
        if failure is not None:
            raise failure

    def requesting(self, address: str, body: bytes, headers: dict[str, str],
                   deadline: float | None, waiter: Waiter, *, here: bool,
                   requester: object | None = None) -> Steps[Message]:
        """Route a request to one consumer of ``address`` and wait (with ``waiter``) for its
        reply (steps; ``requester``: the connection it came over, None for this process).

        Raises:
            ReplyFailure: no reply: NO_HANDLERS, TIMEOUT at ``deadline``, RECIPIENT_FAILURE.
        """
        node = self._node
        entry = node.expect_reply(waiter, deadline, address, requester=requester)
        self.route(Pending(kind="request", address=address, body=body, headers=headers,
                           deadline=deadline, here=here, entry=entry))
        return (yield from node.wait_reply(waiter, entry))

    async def _reply(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        reply = reply_of(request)
        node = self._node
        if reply.kind != "request":
            failure = (reply.failure_code, reply.failure_message) if reply.kind == "fail" else None
            answered = node.answer(reply.reply_address, reply.body, reply.headers, failure,
                                   answerer=ctx.channel)
            return failure_response(answered) if isinstance(answered, ReplyFailure) else (
                ok_response())
        waiter = TaskWaiter()
        deadline = None if reply.timeout is None else deadline_after(reply.timeout)
        after = node.answer(reply.reply_address, reply.body, reply.headers, None,
                            (waiter, deadline, ctx.channel), answerer=ctx.channel)
        if isinstance(after, ReplyFailure):
            return failure_response(after)
        try:
            answer = await drive_async(node.wait_reply(waiter, after))
        except ReplyFailure as failed:
            return failure_response(failed)
        return reply_response(answer.address, answer.body, answer.headers,
                              answer.reply_address)

    # ------------------------------------------------------------------ routing

    def route(self, pending: Pending) -> ReplyFailure | None:
        """Hand ``pending`` to the next consumer of its address: a consumer of this process
        takes it at once, a remote one's push is queued. Returns the failure if it fails
        at once (its waiter gets it too)."""
        node = self._node
        while True:
            target = node.choose(pending.address, here=pending.here, skip=pending.passed)
            if target is None:
                return self._fail(pending, no_handlers(pending.address))
            if isinstance(target, RemoteConsumer):
                offer = self._offer(target, pending)
                if offer == "full":
                    return self._fail(pending, consumer_full(pending.address))
                if offer == "held":
                    return self._fail(pending, _connection_full(pending.address))
                if offer != "gone":
                    return None
            else:
                entry = pending.entry
                if entry is not None:
                    node.hold(entry, None)
                taken = node.send_to(target, pending.kind, pending.address, pending.body,
                                     pending.headers,
                                     None if entry is None else entry.reply_address)
                if taken == "accepted":
                    self._delivered(pending)
                    return None
                if taken == "full":
                    return self._fail(pending, consumer_full(pending.address))
            _pass_over(pending, target)

    def publish(self, address: str, body: bytes, headers: dict[str, str], *, here: bool) -> int:
        """Deliver a publish to every consumer of ``address``; return how many there are.

        A consumer that is full discards it (one of this process: counted as discarded) or
        drops it (a remote one whose window and queue are full: counted as dropped).
        """
        node = self._node
        targets = node.every(address, here=here)
        if not targets:
            with node.lock:
                node.counters.unrouted_publishes += 1
            return 0
        for target in targets:
            if isinstance(target, RemoteConsumer):
                pending = Pending(kind="publish", address=address, body=body, headers=headers,
                                  deadline=None, here=here)
                if self._offer(target, pending) in ("full", "held"):
                    with node.lock:
                        node.counters.dropped += 1
            else:
                node.send_to(target, "publish", address, body, headers)
        return len(targets)

    def _offer(self, target: RemoteConsumer, pending: Pending) -> str:
        node = self._node
        size = pending.size
        with node.lock:
            if not target.registered:
                return "gone"
            budget = target.budget
            if not budget.fits(size):
                return "held"
            outlet = target.outlet
            offer = outlet.offer(pending, pending.deadline, monotonic())
            expired = outlet.take_expired()
            pump = False
            if offer != "full":
                budget.charge(size)
                pending.charged = budget
                if pending.entry is not None:
                    pending.entry.holder = target.channel
                if offer == "push":  # queued for the pump in this same hold of the lock
                    pump = _queue_pushes(target, (pending,))
        for old in expired:
            self._fail(old, _waited_too_long(old))
        if pump:
            self._pump_soon(target)
        elif (offer == "queued" and isinstance(pending.receipt, Answer)
              and pending.deadline is not None):
            self._host.spawn(self._answer_at_deadline, pending)
        return offer

    async def _answer_at_deadline(self, pending: Pending) -> None:
        """Answer a client's send still queued for room at its deadline with TIMEOUT (a
        later receipt is then ignored: the sender was told)."""
        answer, deadline = pending.receipt, pending.deadline
        assert isinstance(answer, Answer)
        assert deadline is not None
        await trio.sleep(max(0.0, deadline - monotonic()))
        node = self._node
        with node.lock:
            if answer.outcome is not None:
                return
            answer.complete(node.count(ReplyFailure(
                "TIMEOUT", "the consumer did not take the message in time",
                address=pending.address)))
        answer.send()

    def _delivered(self, *delivered: Pending) -> None:
        """The consumer's bus has each of ``delivered``: tell their senders (one hold of
        the lock for all: a DELIVER_MANY's receipt settles up to 64)."""
        receipts: list[Waiter] = []
        with self._node.lock:
            for pending in delivered:
                _release(pending)
                receipt = pending.receipt
                if receipt is not None and receipt.outcome is None:
                    receipt.complete(DELIVERED)
                    receipts.append(receipt)
        send_answers(receipts)

    def _fail(self, pending: Pending, failure: ReplyFailure) -> ReplyFailure:
        """Fail ``pending`` to whoever waits for it (counted once); return ``failure``."""
        node = self._node
        with node.lock:
            _release(pending)
            entry, receipt = pending.entry, pending.receipt
            if entry is not None:
                if not node.replies.remove(entry):
                    return failure
                receipt = entry.waiter
                receipt.complete(node.count(failure))
            elif receipt is not None:
                if receipt.outcome is not None:
                    return failure
                receipt.complete(node.count(failure))
            elif pending.kind == "publish":
                node.counters.dropped += 1
            else:
                node.count(failure)
        if isinstance(receipt, Answer):
            receipt.send()
        return failure

    # ------------------------------------------------------------------ pushing (the loop)

    def _push_later(self, target: RemoteConsumer, pushes: list[Pending]) -> None:
        """Queue ``pushes`` (the window admitted them) for ``target``, and have the loop push
        them, in order (from any thread; in a read of requests, once the read is handled:
        what the rest of it routes there goes in the same pushes)."""
        with self._node.lock:
            pump = _queue_pushes(target, pushes)
        if pump:
            self._pump_soon(target)

    def _pump_soon(self, target: RemoteConsumer) -> None:
        """Have the loop run `_pump` for ``target``, whose ``pump_due`` was just set: in a
        read of requests, once the read is handled (what the rest of it routes there goes
        in the same pushes), else soon."""
        if not self._host.after_read(partial(self._pump, target)):
            self._stopped(target)

    def _stopped(self, target: RemoteConsumer) -> None:
        """The server's loop has ended: fail what waited to be pushed."""
        with self._node.lock:
            waiting = list(target.to_push)
            target.to_push.clear()
            target.pump_due = False
        for pending in waiting:
            self._fail(pending, ReplyFailure("RECIPIENT_FAILURE", "the bus server stopped",
                                             address=pending.address))

    def _pump(self, target: RemoteConsumer) -> None:
        """Push ``target``'s queue, in order, while its connection has room (what it pushes
        at once leaves in one write; to a client that takes them, sends and requests go
        several a DELIVER_MANY); then wait for room in a task, if needed (loop thread)."""
        node = self._node
        host = self._host
        channel = target.channel
        many: list[Pending] = []  # the next DELIVER_MANY's messages
        size = 0
        with host.bundled(channel):
            while True:
                # a closed connection has "room": its pushes fail at once, and the close
                # fails the rest (waiting for room there would never end)
                room = host.has_room(channel) or not channel.is_active
                with node.lock:
                    if not target.to_push:
                        target.pump_due = False
                        room = True
                        break
                    if not room:  # pump_due stays set: the waiting task pumps next
                        break
                    pending = target.to_push.popleft()
                    target.outlet.sent(1)
                if not target.many or pending.kind == "publish":
                    if many:  # in order: those before it leave first
                        self._push_many(target, many)
                        many, size = [], 0
                    self._push(target, pending)
                    continue
                many.append(pending)
                size += pending.size
                if len(many) >= MAX_DELIVER_MANY or size >= MAX_DELIVER_MANY_BYTES:
                    self._push_many(target, many)
                    many, size = [], 0
            if many:
                self._push_many(target, many)
        if not room:
            host.spawn(self._pump_after_room, target)

    async def _pump_after_room(self, target: RemoteConsumer) -> None:
        await self._host.wait_room(target.channel)
        self._pump(target)

    def _push(self, target: RemoteConsumer, pending: Pending) -> None:
        remaining = (PUBLISH_PUSH_TIMEOUT if pending.deadline is None
                     else pending.deadline - monotonic())
        if remaining <= 0:
            self._slot_back(target)
            self._fail(pending, ReplyFailure("TIMEOUT", "timed out before it could be pushed "
                                             "to its consumer", address=pending.address))
            return
        entry = pending.entry
        command = deliver_command(target.consumer_id, pending.kind, pending.address,
                                  pending.body, pending.headers,
                                  None if entry is None else entry.reply_address)
        if pending.kind != "publish":
            self._host.push(target.channel, command, remaining,
                            partial(self._pushed, target, pending))
            return
        try:
            self._host.push_oneway(target.channel, command, remaining)
        except RemotingError:  # not sent: the connection is closing, or a bad frame
            self._slot_back(target)
            self._fail(pending, ReplyFailure("RECIPIENT_FAILURE", "could not be pushed to its "
                                             "consumer", address=pending.address))
            return
        with self._node.lock:  # the connection's queue holds it now (its high water mark)
            _release(pending)

    def _push_many(self, target: RemoteConsumer, many: list[Pending]) -> None:
        """Push sends and requests to ``target`` in one DELIVER_MANY (one alone: a DELIVER),
        failing at once those whose deadline passed."""
        now = monotonic()
        live = []
        for pending in many:
            if pending.deadline is not None and pending.deadline <= now:
                self._slot_back(target)
                self._fail(pending, ReplyFailure("TIMEOUT", "timed out before it could be "
                                                 "pushed to its consumer",
                                                 address=pending.address))
            else:
                live.append(pending)
        if len(live) <= 1:
            for pending in live:
                self._push(target, pending)
            return
        delivers = [deliver_command(target.consumer_id, pending.kind, pending.address,
                                    pending.body, pending.headers,
                                    None if pending.entry is None
                                    else pending.entry.reply_address)
                    for pending in live]
        # the push ends at the first deadline: a client that does not answer by then holds
        # all of them, whatever the later ones' deadlines
        deadlines = [pending.deadline for pending in live if pending.deadline is not None]
        remaining = min(deadlines) - now if deadlines else PUBLISH_PUSH_TIMEOUT
        self._host.push(target.channel, deliver_many_command(target.consumer_id, delivers),
                        remaining, partial(self._pushed_many, target, live))

    def _pushed_many(self, target: RemoteConsumer, many: list[Pending],
                     response: RemotingCommand | None, cause: BaseException | None) -> None:
        """Act on how a DELIVER_MANY ended (once, on the loop): for each message as
        `_pushed` does for one, by what the client's answer says of it (``taken``)."""
        taken = (None if response is None or response.code != ResponseCode.SUCCESS
                 else taken_of(response, len(many)))
        if taken is None:  # the push as a whole failed, or the answer makes no sense
            for pending in many:
                if response is not None and response.code == ResponseCode.SUCCESS:
                    self._fail(pending, ReplyFailure(
                        "RECIPIENT_FAILURE", "the consumer's client did not say how it took "
                        "the message", address=pending.address))
                else:
                    self._pushed(target, pending, response, cause)
            return
        if taken == "a" * len(many):  # the usual answer: all taken
            self._delivered(*many)
            return
        gone = []
        for pending, outcome in zip(many, taken, strict=True):
            if outcome == "a":
                self._delivered(pending)
            elif outcome == "g":
                gone.append(pending)
            else:
                self._fail(pending, consumer_full(pending.address))
        if gone:
            self._forget(target)
            for pending in gone:
                self._reroute(pending, target)

    def _pushed(self, target: RemoteConsumer, pending: Pending,
                response: RemotingCommand | None, cause: BaseException | None) -> None:
        """Act on how a push ended (once, on the loop): the consumer's bus has the message,
        or had no such consumer any more (it goes elsewhere), or refused it; or the client
        did not answer in time, or its connection closed, or it could not be sent."""
        address = pending.address
        if response is None:
            if isinstance(cause, RemotingTimeoutError):  # it may still take it: slot counted
                self._fail(pending, ReplyFailure("TIMEOUT", "the consumer's client did not "
                                                 "take the message in time", address=address))
            elif isinstance(cause, RemotingCommandError):  # never sent: the slot is free
                self._slot_back(target)
                self._fail(pending, ReplyFailure("RECIPIENT_FAILURE", f"could not be pushed to "
                                                 f"its consumer: {cause}", address=address))
            else:
                self._fail(pending, ReplyFailure("RECIPIENT_FAILURE", "the consumer's connection "
                                                 "closed before it took the message",
                                                 address=address))
            return
        if response.code == ResponseCode.SUCCESS:
            self._delivered(pending)
        elif response.code == FailureCode.NOT_REGISTERED:
            self._forget(target)
            self._reroute(pending, target)
        else:
            self._fail(pending, failure_of(response, address)
                       or ReplyFailure("RECIPIENT_FAILURE", "refused", address=address))

    def _slot_back(self, target: RemoteConsumer) -> None:
        """A push did not reach the client: give its window slot back."""
        node = self._node
        with node.lock:
            if not target.registered:
                return
            admitted = target.outlet.credit(1, monotonic())
        self._admitted(target, admitted)

    # ------------------------------------------------------------------ consumers gone

    def _forget(self, target: RemoteConsumer) -> None:
        """``target`` was unregistered by its client: route what it was about to get to
        the next consumer of its address (none of it was delivered)."""
        for pending in self._remove(target):
            self._reroute(pending, target)

    def _reroute(self, pending: Pending, passed: RemoteConsumer) -> None:
        """Route ``pending`` (not delivered to ``passed``) to the next consumer."""
        with self._node.lock:
            _release(pending)
        _pass_over(pending, passed)
        self.route(pending)

    def _remove(self, target: RemoteConsumer) -> list[Pending]:
        node = self._node
        with node.lock:
            if not target.registered:
                return []
            target.registered = False
            self._remote.get(target.channel, {}).pop(target.consumer_id, None)
            node.shared.remove(target.address, target)
            node.remote_consumers -= 1
            waiting: list[Pending] = [*target.outlet.clear(), *target.to_push]
            target.to_push.clear()
            return waiting

    def channel_closed(self, channel: ChannelHandle) -> None:
        """A client's connection closed (on the loop): remove its consumers, fail what they
        held or were about to get, and the requests they held; forget its own requests."""
        node = self._node
        with node.lock:
            targets = list(self._remote.pop(channel, {}).values())
            self._budgets.pop(channel, None)
            self._waiting.pop(channel, None)
        self._refusals.forget(channel)
        waiting = [pending for target in targets for pending in self._remove(target)]
        with node.lock:
            requested, held = node.replies.drop_peer(channel)
            for entry in held:
                entry.waiter.complete(node.count(ReplyFailure(
                    "RECIPIENT_FAILURE", "the consumer holding the request went away",
                    address=entry.address)))
            for entry in requested:  # nobody to answer: the requester's connection is gone
                entry.waiter.complete(ReplyFailure("RECIPIENT_FAILURE", "the requester left"))
        send_answers([entry.waiter for entry in held])
        for pending in waiting:
            self._fail(pending, ReplyFailure("RECIPIENT_FAILURE", "the consumer's connection "
                                             "closed", address=pending.address))


def _queue_pushes(target: RemoteConsumer, pushes: Iterable[Pending]) -> bool:
    """Queue ``pushes`` for ``target``'s pump (the lock is held); return True if the pump
    is due now and was not before: the caller then has the loop run it (`_pump_soon`)."""
    target.to_push.extend(pushes)
    if target.pump_due:
        return False
    target.pump_due = True
    return True


def _pass_over(pending: Pending, target: object) -> None:
    """``pending`` goes on to the next consumer: ``target`` did not take it."""
    if pending.passed is None:
        pending.passed = set()
    pending.passed.add(target)


def _release(pending: Pending) -> None:
    """``pending`` leaves its connection's budget, if it is in one (the lock is held)."""
    budget = pending.charged
    if budget is not None:
        pending.charged = None
        budget.release(pending.size)


def _waited_too_long(pending: Pending) -> ReplyFailure:
    return ReplyFailure("TIMEOUT", "timed out waiting for room at the consumer",
                        address=pending.address)


def _connection_full(address: str) -> ReplyFailure:
    return ReplyFailure("RECIPIENT_FAILURE", f"the client of the consumer of {address} holds "
                        "as many messages as the server keeps for one connection "
                        "(max_held_per_connection): it is slow, or not answering", address=address)


def _write_answer(ctx: RequestContext, request: RemotingCommand, outcome: Outcome | None
                  ) -> None:
    """Answer a client's send or request with its outcome (an `Answer`'s write; any thread:
    the answer leaves from the loop). Dropped if the client's connection closed meanwhile,
    or the server stopped."""
    if isinstance(outcome, ReplyFailure):
        response = failure_response(outcome)
    elif isinstance(outcome, Message):
        response = reply_response(outcome.address, outcome.body, outcome.headers,
                                  outcome.reply_address)
    else:  # a send's receipt
        response = ok_response()
    with suppress(RemotingError):  # the server stopped: nobody to answer
        ctx.write_response(request, response)
