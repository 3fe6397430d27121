"""The configuration file ``thirdshift setup`` writes: every setting listed with its
description and its default, commented out (so a later release's defaults still reach a user
who changed nothing), and the repositories ``setup`` was given as the one live value.

An existing file is edited in place, as text: what a person wrote (values, comments, order)
stays byte for byte; a setting the file does not mention yet is added, commented out, before
its first table; a repository not yet in ``repositories`` is appended to it. A file that needs
nothing comes back unchanged, so running ``setup`` twice leaves the same bytes.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import tomlkit
from pydantic.fields import FieldInfo
from tomlkit.exceptions import TOMLKitError

from thirdshift.errors import ConfigError
from thirdshift.settings import ENV_PREFIX, Settings

HEADER = """\
# thirdshift's configuration, written by `thirdshift setup` (what each setting does: thirdshift's
# documentation, docs/configuration.md). Every setting is listed at its default, commented out:
# remove the leading "# " of a line to change it. THIRDSHIFT_<NAME> in the environment wins over
# this file; keep secrets there, never here.
"""
_NOT_IN_FILE = frozenset({"home"})  # the file lives in the home: THIRDSHIFT_HOME says where
_WIDTH = 98
_TABLE = re.compile(r"^\s*\[")
_KEY_LINE = re.compile(r"^\s*#?\s*([A-Za-z0-9_]+)\s*=")


def config_text() -> str:
    """The whole file for a user who has set nothing: the header and each setting's block."""
    return HEADER + "".join("\n" + block for block in _blocks().values())


def with_repository(text: str | None, repository: str, where: Path) -> str:
    """``text`` (the file at ``where``; None when there is none yet) with every setting listed
    and ``repository`` in ``repositories``; unchanged when it has both. A file that is not
    TOML raises ConfigError naming it, and is left as it is."""
    text = config_text() if text is None else text
    try:
        tomlkit.parse(text)
    except TOMLKitError as error:
        raise ConfigError(f"{where}: not valid TOML ({error}); fix or move the file") from error
    return _listing(_every_setting(text), repository)


def _blocks() -> dict[str, str]:
    """Each setting's lines: its description as comments, then its key at its default,
    commented out."""
    blocks: dict[str, str] = {}
    for name, field in Settings.model_fields.items():
        if name in _NOT_IN_FILE:
            continue
        words = textwrap.wrap(field.description or "", _WIDTH - 2, break_on_hyphens=False)
        blocks[name] = "".join(f"# {line}\n" for line in words) + _default_line(name, field)
    return blocks


def _default_line(name: str, field: FieldInfo) -> str:
    if "SecretStr" in str(field.annotation):
        return f"# {name} = (a secret: set {ENV_PREFIX}{name.upper()} in the environment)\n"
    default = field.get_default(call_default_factory=True)
    if default is None:
        return f"# {name} = (not set)\n"
    return f"# {name} = {_toml(default)}\n"


def _toml(value: Any) -> str:
    """``value`` as TOML writes it on one line."""
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        table.update(value)
        return table.as_string()
    return str(tomlkit.item(value).as_string())


def _mentioned(text: str) -> set[str]:
    """The settings ``text`` sets or shows (commented out), and its tables."""
    keys = {match.group(1) for line in text.splitlines() if (match := _KEY_LINE.match(line))}
    return keys | set(tomlkit.parse(text).keys())


def _every_setting(text: str) -> str:
    """``text`` with the block of each setting it does not mention yet, before its first
    table (a key after a table header would belong to the table)."""
    mentioned = _mentioned(text)
    missing = [block for name, block in _blocks().items() if name not in mentioned]
    if not missing:
        return text
    return _inserted(text, "".join("\n" + block for block in missing))


def _inserted(text: str, addition: str) -> str:
    """``addition`` (lines) placed before the first table of ``text``, or at its end."""
    lines = text.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if _TABLE.match(line)), len(lines))
    head = "".join(lines[:at])
    if head and not head.endswith("\n"):
        head += "\n"
    tail = "".join(lines[at:])
    if head.endswith("\n\n") and addition.startswith("\n"):
        addition = addition[1:]  # one blank line between blocks, as written
    return head + addition + ("\n" + tail if tail else "")


def _listing(text: str, repository: str) -> str:
    """``text`` with ``repository`` in ``repositories``: appended to a list that is there
    (kept as written), else set where the commented-out default line stands (when that is
    above the first table), or before the first table."""
    document = tomlkit.parse(text)
    if "repositories" in document:
        listed = document["repositories"]
        if not isinstance(listed, list):
            raise ConfigError("key 'repositories': a list of OWNER/NAME is expected")
        if any(str(item).lower() == repository.lower() for item in listed):
            return text
        listed.append(repository)
        return tomlkit.dumps(document)
    line = f"repositories = {_toml([repository])}\n"
    lines = text.splitlines(keepends=True)
    for i, found in enumerate(lines):
        if _TABLE.match(found):
            break  # a key set below a table header would belong to that table
        if re.match(r"^#\s*repositories\s*=", found):
            lines[i] = line
            return "".join(lines)
    return _inserted(text, "\n" + line)
