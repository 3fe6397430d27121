"""The encoded forms of a known secret: what its value looks like once someone has encoded it.

An agent that read a secret can send it out encoded so that a search for the plain value misses
it (issue 30: the model key, base64-encoded, in a pushed file and in a pull request body). The
scrubber and the pre-push check look for every form ``encoded_forms`` derives, as they look for
the value itself (adr/0043):

- **base64**, standard and URL-safe alphabets, in each of the three alignments: the secret
  preceded by 0, 1 or 2 bytes of whatever else was encoded with it. Only the characters that
  depend on the secret's bytes alone are kept (the stable middle): the first and last characters
  of an encoding mix in the bytes around it, or padding. The middle is a part of the padded and
  the unpadded encoding alike, so both are found.
- **base32**, upper and lower case, in each of its five alignments, the same way.
- **hex**, lower and upper case.
- **percent-encoding**: of every byte (``%73%6B...``, either case of hex), and of the reserved
  characters only (as ``quote`` writes it, with and without ``/`` kept).
- **reversed**.

A secret shorter than ``MIN_ENCODED_LENGTH`` characters has no encoded forms: its forms would be
short enough to turn up in ordinary text (a hex digest, base64 test data), and a secret so short
is found by its plain value only.

Pure functions: the scrubber derives the forms once, when it is built.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

# 12 characters: the shortest form derived then (base64 in its worst alignment) has 15
# characters, about 90 bits of the secret, which ordinary text does not hold by chance.
MIN_ENCODED_LENGTH = 12

BASE64 = "base64"
BASE32 = "base32"
HEX = "hex"
PERCENT = "percent-encoded"
REVERSED = "reversed"


@dataclass(frozen=True)
class SecretForm:
    """One way a known secret can stand in a text: ``text`` to look for, and the ``encoding``
    that made it from the secret (one of the names above)."""

    text: str
    encoding: str


def encoded_forms(secret: str) -> tuple[SecretForm, ...]:
    """Every encoded form of ``secret`` (its UTF-8 bytes), each text once and none equal to the
    secret itself; none for a secret shorter than ``MIN_ENCODED_LENGTH`` characters."""
    if len(secret) < MIN_ENCODED_LENGTH:
        return ()
    data = secret.encode()
    found: dict[str, str] = {}

    def add(encoding: str, *texts: str) -> None:
        for text in texts:
            if text and text != secret:
                found.setdefault(text, encoding)

    for lead in range(3):
        middle = stable_middle(base64.b64encode, 6, data, lead)
        add(BASE64, middle, middle.replace("+", "-").replace("/", "_"))
    for lead in range(5):
        middle = stable_middle(base64.b32encode, 5, data, lead)
        add(BASE32, middle, middle.lower())
    add(HEX, data.hex(), data.hex().upper())
    every_byte = "".join(f"%{byte:02X}" for byte in data)
    add(PERCENT, every_byte, every_byte.lower(), quote(secret, safe=""), quote(secret))
    add(REVERSED, secret[::-1])
    return tuple(SecretForm(text, encoding) for text, encoding in found.items())


def stable_middle(encode: Callable[[bytes], bytes], bits: int, data: bytes, lead: int) -> str:
    """The characters of ``encode`` (``bits`` bits a character) that depend on ``data`` alone
    when ``lead`` bytes stand before it: from the first character that starts within ``data``
    to the last that ends within it. Which bytes lead does not matter; zeros stand in for
    them."""
    first = -(-8 * lead // bits)  # the first character starting at or after the data's first bit
    end = 8 * (lead + len(data)) // bits  # characters ending at or before its last bit
    return encode(bytes(lead) + data)[first:end].decode("ascii")
