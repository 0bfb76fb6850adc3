"""Encrypted PKCS#8 private keys, made with `cryptography` (trustme's dependency).

Two schemes: PBES2 with AES-256-CBC (what OpenSSL and `cryptography` write today) and
PBE-SHA1-3DES (pbeWithSHAAnd3-KeyTripleDES-CBC), the only one Netty 4.1.48 reads, so the one
RocketMQ deployments use. `cryptography` writes PBE-SHA1-3DES only inside PKCS#12, so the
key's shrouded bag (an EncryptedPrivateKeyInfo, the PKCS#8 structure itself) is taken out of
a PKCS#12 file by walking its DER.
"""

from __future__ import annotations

import base64
from typing import Final, Literal

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import PrivateFormat, pkcs12

Scheme = Literal["pbes2-aes", "pbe-sha1-3des"]
SCHEMES: Final[tuple[Scheme, ...]] = ("pbes2-aes", "pbe-sha1-3des")
# the DER of OID 1.2.840.113549.1.12.10.1.2 (pkcs8ShroudedKeyBag)
PKCS8_SHROUDED_KEY_BAG: Final = bytes.fromhex("2a864886f70d010c0a0102")


def encrypt_key(key_pem: bytes, password: bytes, scheme: Scheme) -> bytes:
    """Return ``key_pem`` (an unencrypted PEM key) as an encrypted PKCS#8 PEM key."""
    key = serialization.load_pem_private_key(key_pem, None)
    if scheme == "pbes2-aes":
        return key.private_bytes(serialization.Encoding.PEM, PrivateFormat.PKCS8,
                                 serialization.BestAvailableEncryption(password))
    encryption = (PrivateFormat.PKCS12.encryption_builder().kdf_rounds(2048)
                  .key_cert_algorithm(pkcs12.PBES.PBESv1SHA1And3KeyTripleDESCBC)
                  .hmac_hash(hashes.SHA1()).build(password))
    pfx = pkcs12.serialize_key_and_certificates(None, key, None, None,  # type: ignore[arg-type]
                                                encryption)
    der = _shrouded_key(pfx)
    return (b"-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + base64.encodebytes(der)
            + b"-----END ENCRYPTED PRIVATE KEY-----\n")


def _element(der: bytes, at: int) -> tuple[int, int]:
    """Return where the content of the DER element at ``at`` starts and ends."""
    n = der[at + 1]
    start = at + 2
    if n & 0x80:
        size = n & 0x7F
        n = int.from_bytes(der[start:start + size], "big")
        start += size
    return start, start + n


def _children(der: bytes, at: int) -> list[int]:
    """Return the offsets of the elements inside the constructed element at ``at``."""
    start, end = _element(der, at)
    found = []
    while start < end:
        found.append(start)
        start = _element(der, start)[1]
    return found


def _content(der: bytes, at: int) -> bytes:
    start, end = _element(der, at)
    return der[start:end]


def _shrouded_key(pfx: bytes) -> bytes:
    """Return the EncryptedPrivateKeyInfo of a PKCS#12 file holding one unencrypted SafeContents
    (PFX -> authSafe ContentInfo -> [0] OCTET STRING -> ContentInfo* -> SafeBag*)."""
    auth_safe = _children(pfx, 0)[1]
    safe_list = _content(pfx, _children(pfx, _children(pfx, auth_safe)[1])[0])
    for info in _children(safe_list, 0):
        bags = _content(safe_list, _children(safe_list, _children(safe_list, info)[1])[0])
        for bag in _children(bags, 0):
            bag_id, value = _children(bags, bag)[:2]
            if _content(bags, bag_id) == PKCS8_SHROUDED_KEY_BAG:
                key_info = _children(bags, value)[0]
                return bags[key_info:_element(bags, key_info)[1]]
    raise AssertionError("the PKCS#12 file holds no shrouded key bag")
