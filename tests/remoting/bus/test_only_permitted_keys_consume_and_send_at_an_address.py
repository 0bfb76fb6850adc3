"""An operator says which addresses each ACL access key may consume at and send to
(``EventBus(permissions=...)``, docs/bus.md): a peer with valid credentials can no longer
register a consumer at a service's address and answer its requests. Real ACL signatures
(RocketMQ's, `AclServerRPCHook`) over 127.0.0.1, both client faces.

The review's case: with ACL permissions per request code only, an allowed REGISTER covered
every address, and an intruder's consumer at the service's address answered 5 of 10 requests.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio

from remoting import (
    AclClientRPCHook,
    AclServerRPCHook,
    ClientConfig,
    RemotingClient,
    RemotingServer,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting.bus import (
    AddressPermissions,
    BusClient,
    BusPermissionError,
    EventBus,
    Message,
    ReplyFailure,
    TrioBusClient,
)
from remoting.cli import main
from tests.logs import capture_logs

from ...processes import Proc
from .conftest import WAIT

SECRETS = {"shop": "shop-secret", "customer": "customer-secret", "intruder": "intruder-secret"}
PERMISSIONS = {
    "shop": AddressPermissions(consume=["price"], send=[re.compile(r".*")]),
    "customer": AddressPermissions(send=["price", "news"]),
    "intruder": AddressPermissions(send=["price"], consume=[re.compile(r"intruder\..+")]),
    "*": AddressPermissions(send=["news"]),  # other keys, and requests without one
}


@pytest.fixture
def bus() -> Iterator[EventBus]:
    with EventBus(permissions=PERMISSIONS) as bus:
        yield bus


@pytest.fixture
def server(bus: EventBus) -> Iterator[RemotingServer]:
    server = RemotingServer(ServerConfig())
    bus.attach(server)  # before the ACL hook: the bus looks for it when requests come
    server.register_rpc_hook(AclServerRPCHook(SECRETS, allow_anonymous=True))
    server.start()
    try:
        yield server
    finally:
        server.shutdown()


@pytest.fixture
def connect(server: RemotingServer) -> Iterator[Callable[[str | None], BusClient]]:
    made: list[tuple[RemotingClient, BusClient]] = []

    def make(access_key: str | None) -> BusClient:
        client = RemotingClient(ClientConfig()).start()
        if access_key is not None:
            client.register_rpc_hook(AclClientRPCHook(access_key, SECRETS.get(access_key, "x")))
        bus_client = BusClient(client, server.addr)
        made.append((client, bus_client))
        return bus_client

    yield make
    for client, bus_client in made:
        bus_client.close()
        client.shutdown()


def test_an_intruder_cannot_take_over_a_services_address(
        connect: Callable[[str | None], BusClient]) -> None:
    shop, customer, intruder = connect("shop"), connect("customer"), connect("intruder")
    shop.consumer("price", lambda m: m.reply(b"shop: " + m.body))
    stolen: list[Message] = []
    with pytest.raises(BusPermissionError) as refused:
        intruder.consumer("price", stolen.append)
    assert refused.value.address == "price"
    assert "AccessKey 'intruder' may not consume at address 'price'" in str(refused.value)
    answers = [customer.request("price", b"%d" % i, timeout=WAIT).body for i in range(10)]
    assert answers == [b"shop: %d" % i for i in range(10)]  # every one answered by the shop
    assert stolen == []
    intruder.consumer("intruder.inbox", stolen.append)  # what it is granted, it may do


def test_sending_is_permitted_per_address_too(connect: Callable[[str | None], BusClient]
                                              ) -> None:
    shop, customer = connect("shop"), connect("customer")
    got = threading.Event()
    shop.consumer("price", lambda m: got.set())
    customer.send("price", b"ok", timeout=WAIT)
    assert got.wait(WAIT)
    for call in (lambda: customer.send("orders", b"x", timeout=WAIT),
                 lambda: customer.publish("orders", b"x", timeout=WAIT),
                 lambda: customer.request("orders", b"x", timeout=WAIT)):
        with pytest.raises(BusPermissionError, match="may not send at address 'orders'"):
            call()
    with pytest.raises(BusPermissionError, match="may not consume"):
        customer.consumer("orders", lambda m: None)
    with pytest.raises(ReplyFailure) as caught:  # permitted: nobody consumes there
        shop.send("orders", b"x", timeout=WAIT)
    assert caught.value.kind == "NO_HANDLERS"


def test_other_keys_and_anonymous_requests_get_the_star_entry(
        connect: Callable[[str | None], BusClient]) -> None:
    anonymous, customer, shop = connect(None), connect("customer"), connect("shop")
    heard = threading.Event()
    shop.consumer("price", lambda m: heard.set())
    with pytest.raises(BusPermissionError, match="a request without an AccessKey may not send"):
        anonymous.send("price", b"x", timeout=WAIT)
    anonymous.publish("news", b"x", timeout=WAIT)  # the "*" entry sends there
    customer.publish("news", b"x", timeout=WAIT)
    assert not heard.is_set()


def test_an_unknown_key_is_refused_by_the_acl_before_the_bus_sees_it(
        connect: Callable[[str | None], BusClient]) -> None:
    stranger = connect("stranger")  # signs with a key the ACL does not know
    with pytest.raises(BusPermissionError, match=r"\[ACL\] unknown AccessKey"):
        stranger.consumer("price", lambda m: None)


def test_refusals_are_logged_once_per_connection_and_operation(
        connect: Callable[[str | None], BusClient]) -> None:
    intruder = connect("intruder")
    with capture_logs() as events:
        for i in range(50):
            with pytest.raises(BusPermissionError):
                intruder.consumer(f"service.{i}", lambda m: None)
            with pytest.raises(BusPermissionError):
                intruder.send("orders", b"x", timeout=WAIT)
    denied = [e for e in events if e["event"] == "bus.permission_denied"]
    assert [(e["operation"], e["access_key"]) for e in denied] == [
        ("consume", "intruder"), ("send", "intruder")]
    assert not [e for e in events if e["log_level"] == "error"]


def test_permissions_without_an_acl_hook_refuse_every_client_request() -> None:
    server = RemotingServer(ServerConfig())
    with EventBus(permissions=PERMISSIONS) as bus, RemotingClient(ClientConfig()) as client:
        bus.attach(server)
        server.start()
        try:
            client.register_rpc_hook(AclClientRPCHook("shop", "forged"))  # nobody checks it
            with BusClient(client, server.addr) as shop, pytest.raises(
                    BusPermissionError, match="verifies no access keys: register an "
                                              "AclServerRPCHook"):
                shop.consumer("price", lambda m: None)
        finally:
            server.shutdown()


async def test_a_trio_bus_client_is_refused_alike(nursery: trio.Nursery) -> None:
    server = TrioRemotingServer(ServerConfig())
    server.register_rpc_hook(AclServerRPCHook(SECRETS))
    bus = EventBus(permissions=PERMISSIONS)
    bus.attach(server)
    port = await nursery.start(server.serve)
    addr = f"127.0.0.1:{port}"
    clients = []
    for key in ("shop", "intruder"):
        client = TrioRemotingClient(ClientConfig())
        client.register_rpc_hook(AclClientRPCHook(key, SECRETS[key]))
        await nursery.start(client.serve)
        clients.append(TrioBusClient(client, addr))
    shop, intruder = clients
    await shop.consumer("price", lambda m: m.reply(b"shop"))
    stolen: list[Message] = []
    with pytest.raises(BusPermissionError, match="may not consume at address 'price'"):
        await intruder.consumer("price", stolen.append)
    answers = [(await intruder.request("price", b"?", timeout=WAIT)).body for _ in range(5)]
    assert answers == [b"shop"] * 5 and stolen == []
    await bus.request_async("price", b"the server's own code is not checked", timeout=WAIT)


def test_the_server_s_own_consumers_and_messages_are_not_checked(
        bus: EventBus, connect: Callable[[str | None], BusClient]) -> None:
    customer = connect("customer")
    with pytest.raises(BusPermissionError):
        customer.consumer("audit", lambda m: None)
    bus.consumer("audit", lambda m: m.reply(b"audited"))  # the server's code is trusted
    assert bus.request("audit", timeout=WAIT).body == b"audited"


@pytest.mark.parametrize(("options", "error", "says"), [
    ({"consume": "price"}, TypeError, "wrap it in a list"),
    ({"consume": [42]}, TypeError, "addresses \\(str\\) or re.compile"),
    ({"send": [""]}, ValueError, "send"),
    ({"send": [re.compile(b"x")]}, TypeError, "bytes"),
])
def test_bad_permissions_fail_when_made(options: dict[str, object], error: type[Exception],
                                        says: str) -> None:
    with pytest.raises(error, match=says):
        AddressPermissions(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize("permissions", [
    ["shop"], {"shop": ["price"]}, {"": AddressPermissions()}])
def test_a_bus_refuses_permissions_that_are_not_a_table_of_keys(permissions: object) -> None:
    with pytest.raises(TypeError, match="permissions"):
        EventBus(permissions=permissions)  # type: ignore[arg-type]


def test_permissions_match_exact_addresses_and_whole_regexes() -> None:
    grant = AddressPermissions(consume=["a.b", re.compile(r"orders\.[a-z]+")])
    assert grant.allows("consume", "a.b") and not grant.allows("consume", "aXb")
    assert grant.allows("consume", "orders.eu") and not grant.allows("consume", "orders.eu.x")
    assert not grant.allows("send", "a.b")


# --------------------------------------------------------------------------- remoting bus --acl

ACL_FILE = """
allow_anonymous = false

[accounts.shop]
secret_key = "shop-secret"
consume = ["price"]
send_regex = ['.*']

[accounts.intruder]
secret_key = "intruder-secret"
send = ["price"]
consume_regex = ['intruder\\..+']
"""


def test_remoting_bus_reads_who_may_use_which_address_from_its_acl_file(
        tmp_path: Path) -> None:
    acl = tmp_path / "acl.toml"
    acl.write_text(ACL_FILE)
    proc = Proc("bus", "--port", "0", "--acl", str(acl))
    try:
        addr = "127.0.0.1:" + proc.expect(r"event bus on 127\.0\.0\.1:(\d+)").group(1)
        with RemotingClient() as c1, RemotingClient() as c2, RemotingClient() as c3:
            c1.register_rpc_hook(AclClientRPCHook("shop", "shop-secret"))
            c2.register_rpc_hook(AclClientRPCHook("intruder", "intruder-secret"))
            with BusClient(c1, addr) as shop, BusClient(c2, addr) as intruder, BusClient(
                    c3, addr) as anonymous:
                shop.consumer("price", lambda m: m.reply(b"shop"))
                with pytest.raises(BusPermissionError, match="may not consume"):
                    intruder.consumer("price", lambda m: None)
                assert intruder.request("price", timeout=WAIT).body == b"shop"
                with pytest.raises(BusPermissionError, match="no AccessKey"):
                    anonymous.send("price", timeout=WAIT)
    finally:
        code = proc.stop()
    assert code == 0


@pytest.mark.parametrize(("text", "says"), [
    ("[accounts.a]\nsecret_key = 's'\nconsume = 'x'\n", "accounts.a.consume must be a list"),
    ("[accounts.a]\nsecret = 's'\n", "unknown key accounts.a.secret"),
    ("[accounts.a]\nconsume = []\n", "accounts.a.secret_key must be a non-empty string"),
    ("[accounts.a]\nsecret_key = 's'\nsend_regex = ['(']\n", "is no regex"),
    ("[accounts.a]\nsecret_key = 's'\ncodes = ['1']\n", "list of request codes"),
    ("allow_anonymous = 'yes'\n[accounts.a]\nsecret_key = 's'\n", "true or false"),
    ("[anyone]\nsend = ['x']\n", "[accounts.NAME] tables are needed"),
    ("not toml at all", "not TOML"),
])
def test_remoting_bus_refuses_a_bad_acl_file_in_one_line(
        tmp_path: Path, text: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    acl = tmp_path / "acl.toml"
    acl.write_text(text)
    assert main(["bus", "--acl", str(acl)]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and "'s'" not in err


def test_remoting_bus_refuses_a_missing_acl_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bus", "--acl", "/no/such/acl.toml"]) == 2
    assert "No such file" in capsys.readouterr().err
