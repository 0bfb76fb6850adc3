"""`Acceptor`: a server's accepting side. Admission limits, the TLS mode, a connection per peer.

A connection over a limit is refused. A plaintext one is told why first, as RocketMQ answers a
busy broker: the acceptor reads its first request (at most `REFUSED_FRAME_BYTES`, within
`REFUSAL_SECONDS`), answers it, and any request read with it, ``SYSTEM_BUSY`` with a remark
naming the limit, then closes. That read is what lets the answer carry the request's opaque,
which the client needs to match it to its call. What a refused peer can cost is bounded: at
most `MAX_REFUSALS_ANSWERED` are being answered at once (beyond, they are closed at once, as
are TLS connections in enforcing mode: a handshake is the costliest thing a peer can make a
server do), each for at most a second and one small frame.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from codec import CodecError, FrameDecoder, RemotingCommand, ResponseCode, encode_frame

from .._log import log
from .._security._tls import server_context, tls_server_stream

if TYPE_CHECKING:
    from .._config import ServerConfig
    from ._endpoint import Endpoint

__all__ = ["Acceptor", "Admission", "refusal_answers"]

MAX_REFUSALS_ANSWERED: Final = 64  # refused connections being told why at once
REFUSAL_SECONDS: Final = 1.0  # how long one may take to send its first request
REFUSED_FRAME_BYTES: Final = 64 * 1024  # the largest first request read to answer it
REFUSAL_PREFIX: Final = "[CONNECTION_REFUSED] "  # remark prefix, as RocketMQ's [REJECTREQUEST]


class Admission:
    """Counts connections per server and per remote IP; refuses beyond the limits."""

    def __init__(self, max_total: int, max_per_ip: int,
                 max_answering: int = MAX_REFUSALS_ANSWERED) -> None:
        self.max_total = max_total
        self.max_per_ip = max_per_ip
        self.max_answering = max_answering
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self.answering = 0  # refused connections being told why

    def admit(self, ip: str) -> str | None:
        """Count a new connection from ``ip``; return why it is refused, or None.

        A refused connection is still counted: call `release` for every `admit`.
        """
        # counted before the check, refused or not: the refused socket is open until it is
        # told why and closed, and it counts against the limits meanwhile
        self.total += 1
        n = self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        if self.max_total and self.total > self.max_total:
            return f"server has {_connections(self.max_total)} (max_connections)"
        if self.max_per_ip and n > self.max_per_ip:
            return f"{ip} has {_connections(self.max_per_ip)} (max_connections_per_ip)"
        return None

    def release(self, ip: str) -> None:
        """Forget one connection from ``ip``."""
        self.total -= 1
        n = self.per_ip[ip] - 1
        if n:
            self.per_ip[ip] = n
        else:
            del self.per_ip[ip]

    def start_answer(self) -> bool:
        """Take a slot to tell a refused connection why; False: close it without a word.
        Call `answer_done` for every True."""
        if self.answering >= self.max_answering:
            return False
        self.answering += 1
        return True

    def answer_done(self) -> None:
        """Give back a slot `start_answer` took."""
        self.answering -= 1


def _connections(n: int) -> str:
    return "1 connection" if n == 1 else f"{n} connections"


def refusal_answers(decoder: FrameDecoder, reason: str) -> list[bytes]:
    """Return the SYSTEM_BUSY answers to the requests complete in ``decoder`` (none to a
    oneway request or a response), each with a remark naming the limit.

    Raises:
        CodecError: the bytes are not a frame of ours, or one over the decoder's limit.
    """
    answers = []
    while (request := decoder.next_command()) is not None:
        if request.is_response or request.is_oneway:
            continue
        # SYSTEM_BUSY with a bracketed reason, as RocketMQ's NettyRemotingAbstract answers a
        # request its processor rejects ("[REJECTREQUEST]system busy, ...")
        answer = RemotingCommand.response_to(
            request, ResponseCode.SYSTEM_BUSY,
            f"{REFUSAL_PREFIX}{reason}: the server closes this connection; retry later or "
            "on another server")
        answer.serialize_type = request.serialize_type  # a Java peer reads what it sent
        answers.append(encode_frame(answer))
    return answers


class Acceptor:
    """Accepts connections on a server's listeners and hands each to the endpoint."""

    def __init__(self, endpoint: Endpoint, config: ServerConfig) -> None:
        self._endpoint = endpoint
        self._config = config
        self._tls = server_context(config)
        self._admission = Admission(config.max_connections, config.max_connections_per_ip)

    @property
    def admitted(self) -> int:
        """Sockets accepted and not yet released (see `Admission`)."""
        return self._admission.total

    async def handle(self, stream: trio.SocketStream) -> None:
        """Serve one accepted connection until it closes (a `trio.serve_listeners` handler)."""
        try:
            host, port = stream.socket.getpeername()[:2]
        except OSError:  # reset between accept and here: nothing to serve or count
            await stream.aclose()
            return
        peer = f"{host}:{port}"
        refusal = self._admission.admit(host)
        try:
            if refusal is not None:
                log.warning("connection.refused", peer=peer, reason=refusal)
                await self._refuse(stream, refusal)
                return
            try:
                served = await self._tls_mode(stream)
            except OSError:  # the peer is gone: this connection only, never the acceptor
                served = None
            if served is None:
                log.warning("connection.refused", peer=peer,
                            reason=f"TLS handshake failed (tls_mode={self._config.tls_mode})")
                await stream.aclose()
                return
            await self._endpoint.adopt(served, peer).run()
        finally:
            self._admission.release(host)

    async def _refuse(self, stream: trio.SocketStream, reason: str) -> None:
        """Answer the first request (and those read with it) SYSTEM_BUSY naming ``reason``,
        then close; close at once when over `MAX_REFUSALS_ANSWERED` or TLS is enforced."""
        admission = self._admission
        if self._config.tls_mode == "enforcing" or not admission.start_answer():
            await stream.aclose()
            return
        try:
            decoder = FrameDecoder(REFUSED_FRAME_BYTES)
            with trio.move_on_after(REFUSAL_SECONDS):
                answers: list[bytes] = []
                read = 0
                while not answers and read < REFUSED_FRAME_BYTES:  # oneways get no answer
                    data = await stream.receive_some(REFUSED_FRAME_BYTES)
                    if not data:
                        break
                    read += len(data)
                    decoder.feed(data)
                    answers = refusal_answers(decoder, reason)
                if answers:
                    await stream.send_all(b"".join(answers))
                    # a FIN after the answers, not a reset: a reset may discard them unread
                    await stream.send_eof()
        except (CodecError, trio.BrokenResourceError, OSError):
            pass  # not our protocol, too large, or gone: closed without an answer
        finally:
            admission.answer_done()
            # shielded: a server shutting down still closes the socket (aclose does not block
            # on a plain TCP stream)
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _tls_mode(self, stream: trio.SocketStream) -> trio.abc.Stream | None:
        if self._tls is None:
            return stream
        with trio.move_on_after(self._config.tls_handshake_timeout):
            return await tls_server_stream(stream, self._tls, self._config.tls_mode)
        return None
