"""``tls_properties_file``: RocketMQ's ``tls.properties`` configures our server and client, read
as ``java.util.Properties`` reads it; fields given explicitly win over the file."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import trio

from codec import RemotingCommand
from processors import AsyncEchoProcessor
from remoting import (
    ClientConfig,
    RemotingStartError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting._tls_properties import parse_properties

from .conftest import KEY_PASSWORD, EncryptedKeys, Pki

ECHO = 1

# Each line's key and value as Java 17's Properties.load read this text (checked with it).
JAVA_CASES = (
    "# comment\n  ! also comment\nplain=value\nspaced   =   v with trailing   \ncolon:c\n"
    "ws key\\ part  value\nnosep\nempty=\n=novalue\nmulti = line one \\\n    line two\\\n"
    "\tline three\ndouble=\\\\\nafter=x\nesc=\\t\\n\\u0041\\zq\\=\\:\nkey\\=with=eq\n"
    "\\#notcomment=1\nsep2 = = two\nsep3 :=x\nlatin=\xe9\r\ncr=1\rtrailing=end\\"
)
JAVA_READ = {
    "": "novalue", "#notcomment": "1", "after": "x", "colon": "c", "cr": "1", "double": "\\",
    "empty": "", "esc": "\t\nAzq=:", "key=with": "eq", "latin": "\xe9",
    "multi": "line one line twoline three", "nosep": "", "plain": "value", "sep2": "= two",
    "sep3": "=x", "spaced": "v with trailing   ", "trailing": "end", "ws": "key part  value",
}


def test_the_file_is_read_as_java_reads_it() -> None:
    assert parse_properties(JAVA_CASES) == JAVA_READ


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "tls.properties"
    path.write_bytes(text.encode("latin-1"))  # Properties.load(InputStream) reads ISO 8859-1
    return str(path)


def rocketmq_file(tmp_path: Path, pki: Pki, keys: EncryptedKeys) -> str:
    return write(tmp_path, f"""\
# written for a RocketMQ broker and its clients
tls.test.mode.enable=false
tls.server.mode=enforcing
tls.server.need.client.auth=optional
tls.server.keyPath={keys.server_key}
tls.server.keyPassword={KEY_PASSWORD}
tls.server.certPath={pki.server_cert}
tls.server.authClient=true
tls.server.trustCertPath={pki.ca_file}
tls.enable=true
tls.client.keyPath={keys.client_key}
tls.client.keyPassword={KEY_PASSWORD}
tls.client.certPath={pki.client_cert}
tls.client.authServer=true
tls.client.trustCertPath={pki.ca_file}
""")


def test_each_side_takes_its_keys(tmp_path: Path, pki: Pki,
                                  encrypted_keys: EncryptedKeys) -> None:
    path = rocketmq_file(tmp_path, pki, encrypted_keys)
    server = ServerConfig(tls_properties_file=path)
    assert (server.tls_mode, server.tls_client_auth, server.tls_cert_file, server.tls_key_file,
            server.tls_key_password, server.tls_ca_file) == (
        "enforcing", "optional", pki.server_cert, encrypted_keys.server_key, KEY_PASSWORD,
        pki.ca_file)
    client = ClientConfig(tls_properties_file=path)
    assert (client.use_tls, client.tls_verify, client.tls_cert_file, client.tls_key_file,
            client.tls_key_password, client.tls_ca_file) == (
        True, True, pki.client_cert, encrypted_keys.client_key, KEY_PASSWORD, pki.ca_file)


async def test_one_file_configures_a_server_and_a_client_that_talk(
        nursery: trio.Nursery, tmp_path: Path, pki: Pki, encrypted_keys: EncryptedKeys) -> None:
    path = rocketmq_file(tmp_path, pki, encrypted_keys)
    server = TrioRemotingServer(ServerConfig(tls_properties_file=path))
    server.register_processor(ECHO, AsyncEchoProcessor())
    await nursery.start(server.serve)
    client = TrioRemotingClient(ClientConfig(tls_properties_file=path))
    await nursery.start(client.serve)
    response = await client.invoke_sync(f"127.0.0.1:{server.port}",
                                         RemotingCommand.create_request(ECHO, body=b"f"), 5)
    assert response.body == b"f"
    [channel] = server.channels()
    assert channel.tls_version is not None


def test_explicit_fields_win_over_the_file(tmp_path: Path, pki: Pki,
                                           encrypted_keys: EncryptedKeys) -> None:
    path = rocketmq_file(tmp_path, pki, encrypted_keys)
    server = ServerConfig(tls_properties_file=path, tls_mode="permissive",
                          tls_client_auth="require", tls_ca_file=pki.other_ca_file)
    assert (server.tls_mode, server.tls_client_auth, server.tls_ca_file) == (
        "permissive", "require", pki.other_ca_file)
    assert server.tls_cert_file == pki.server_cert  # the rest still comes from the file
    client = ClientConfig(tls_properties_file=path, tls_cert_file=pki.stranger_cert,
                          tls_key_file=pki.stranger_key, tls_key_password=None)
    assert (client.tls_cert_file, client.tls_key_file) == (pki.stranger_cert, pki.stranger_key)
    assert client.tls_key_password == KEY_PASSWORD  # None is the default: the file fills it


@pytest.mark.parametrize(("text", "verify"), [
    ("tls.test.mode.enable=true\ntls.client.authServer=true\n", False),  # test mode wins
    ("tls.test.mode.enable=false\ntls.client.authServer=false\n", False),
    ("tls.client.authServer=TRUE\n", True),
    ("tls.enable=true\n", True),  # Java would not verify (authServer defaults to false); we do
])
def test_test_mode_and_auth_server_decide_verification(tmp_path: Path, text: str,
                                                       verify: bool) -> None:
    assert ClientConfig(tls_properties_file=write(tmp_path, text)).tls_verify is verify


def test_need_client_auth_defaults_to_none_as_in_java(tmp_path: Path, pki: Pki) -> None:
    # A trust file alone asks for no client certificate in Java; the file means the same here.
    config = ServerConfig(tls_properties_file=write(
        tmp_path, f"tls.server.trustCertPath={pki.ca_file}\n"))
    assert config.tls_ca_file == pki.ca_file and config.client_auth() == "none"


def test_empty_values_are_left_unset_as_in_java(tmp_path: Path) -> None:
    config = ClientConfig(tls_properties_file=write(
        tmp_path, "tls.client.keyPath=\ntls.client.keyPassword=\n"))
    assert (config.tls_key_file, config.tls_key_password) == (None, None)


@pytest.mark.parametrize(("text", "words"), [
    ("tls.server.mode=ENFORCING\n",
     "tls.server.mode='ENFORCING' in ServerConfig.tls_properties_file .* must be one of "
     "disabled, permissive, enforcing"),
    ("tls.server.mode=enforcing \n", "tls.server.mode='enforcing '"),  # Java keeps the space
    ("tls.server.need.client.auth=maybe\n", "tls.server.need.client.auth='maybe'"),
    ("tls.server.keyPath=\\u00zz\n", "malformed \\\\uxxxx escape"),
])
def test_a_value_java_would_replace_silently_is_an_error(tmp_path: Path, text: str,
                                                          words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ServerConfig(tls_properties_file=write(tmp_path, text))


def test_a_client_boolean_that_is_not_true_or_false_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tls.client.authServer='yes' .* must be true or false"):
        ClientConfig(tls_properties_file=write(tmp_path, "tls.client.authServer=yes\n"))


def test_a_file_that_cannot_be_read_is_a_start_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.properties")
    with pytest.raises(RemotingStartError, match="cannot read ClientConfig.tls_properties_file"):
        ClientConfig(tls_properties_file=missing)
    with pytest.raises(RemotingStartError, match="No such file"):
        ServerConfig(tls_properties_file=missing)


def test_a_config_made_from_a_file_travels_without_it(tmp_path: Path, pki: Pki,
                                                      encrypted_keys: EncryptedKeys) -> None:
    # A Spark executor gets the values the driver read; it need not have the file.
    path = Path(rocketmq_file(tmp_path, pki, encrypted_keys))
    config = ClientConfig(tls_properties_file=str(path))
    blob = pickle.dumps(config)
    path.unlink()
    copy = pickle.loads(blob)
    assert copy == config and copy.tls_properties_file is None
    assert copy.tls_key_password == KEY_PASSWORD and copy.use_tls
