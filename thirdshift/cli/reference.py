"""The documentation site's two generated pages: the command reference, read from the click
commands, and the settings reference, read from the ``Settings`` model.

Both are Markdown built at documentation build time (docs/hooks.py), so neither can drift from
the code (adr/0035). Pure functions of the command tree and the model: nothing here reads files.
"""

from __future__ import annotations

import html
import inspect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from thirdshift.settings import ENV_PREFIX, Settings

PROGRAM = "thirdshift"

# Settings whose default the loader supplies rather than the model: the home comes only from
# THIRDSHIFT_HOME (a config file inside the home cannot say where the home is).
_LOADER_DEFAULTS = {"home": "`~/.thirdshift`"}


@dataclass(frozen=True)
class CommandEntry:
    """One command of the tree: its words after ``thirdshift`` and its click object, with the
    context click needs to show its usage."""

    words: tuple[str, ...]
    command: click.Command
    context: click.Context


def command_entries(group: click.Group) -> Iterator[CommandEntry]:
    """Every command and group, the root first, then depth-first in the order ``--help`` lists
    them."""

    def walk(
        command: click.Command, words: tuple[str, ...], parent: click.Context | None
    ) -> Iterator[CommandEntry]:
        name = words[-1] if words else PROGRAM
        # The command's own context settings (the root's -h), as click applies them on a call.
        context = click.Context(command, info_name=name, parent=parent, **command.context_settings)
        yield CommandEntry(words, command, context)
        if isinstance(command, click.Group):
            for name in command.list_commands(context):
                child = command.get_command(context, name)
                if child is not None:
                    yield from walk(child, (*words, name), context)

    yield from walk(group, (), None)


def option_names(command: click.Command) -> list[str]:
    """Every spelling of every option of ``command`` (``--merge``, ``-h``, ``--no-x``)."""
    return [
        name
        for parameter in command.params
        if isinstance(parameter, click.Option)
        for name in (*parameter.opts, *parameter.secondary_opts)
    ]


def command_reference(group: click.Group) -> str:
    """The command reference page: a section per command with its usage, help text, arguments
    and options (with their help, choices and defaults as ``--help`` shows them)."""
    parts = [
        "# Command reference\n",
        "Generated from the commands themselves when the site is built; what each command "
        "prints, its exit statuses and its messages are on the topic pages (see "
        "[Commands](../commands.md)).\n",
    ]
    parts += [_command_section(entry) for entry in command_entries(group)]
    return "\n".join(parts)


def _command_section(entry: CommandEntry) -> str:
    title = " ".join((PROGRAM, *entry.words))
    usage = " ".join(entry.command.get_usage(entry.context).split()).removeprefix("Usage: ")
    lines = [f"## `{title}`\n", f"`{usage}`\n"]
    if entry.command.help:
        lines.append(_text(inspect.cleandoc(entry.command.help)) + "\n")
    arguments = [p for p in entry.command.params if isinstance(p, click.Argument)]
    if arguments:
        lines.append("Arguments:\n")
        lines += [_argument_line(p, entry.context) for p in arguments]
        lines.append("")
    records = [
        record
        for p in entry.command.get_params(entry.context)
        if isinstance(p, click.Option) and (record := p.get_help_record(entry.context))
    ]
    if records:
        lines.append("Options:\n")
        lines += [
            f"- `{names}`" + (f": {_text(help_)}" if help_ else "") for names, help_ in records
        ]
        lines.append("")
    if isinstance(entry.command, click.Group):
        commands = entry.command.list_commands(entry.context)
        lines.append("Commands: " + ", ".join(f"`{title} {name}`" for name in commands) + ".\n")
    return "\n".join(lines)


def _argument_line(argument: click.Argument, context: click.Context) -> str:
    need = "required" if argument.required else "optional"
    many = ", repeatable" if argument.nargs == -1 else ""
    return f"- `{argument.make_metavar(context)}` ({need}{many})"


def _text(text: str) -> str:
    """Help text as Markdown prose: one paragraph, angle brackets kept as text."""
    return html.escape(" ".join(text.split()), quote=False)


def settings_reference() -> str:
    """The settings reference page: a section per ``Settings`` field with its type, default,
    environment variable(s) and description."""
    parts = [
        "# Settings reference\n",
        "Generated from the `Settings` model when the site is built. Each setting is a key of "
        "`$THIRDSHIFT_HOME/config.toml` and an environment variable, which wins over the file; "
        "a list or table is given to its environment variable as JSON. What each does in "
        "context is on [Configuration](../configuration.md).\n",
    ]
    for name, field in Settings.model_fields.items():
        parts.append(_setting_section(name, field))
    return "\n".join(parts)


def setting_variables(name: str, field: FieldInfo) -> list[str]:
    """The environment variables that set ``name``: ``THIRDSHIFT_<NAME>``, or the aliases the
    field names (``GITHUB_TOKEN`` too)."""
    alias = field.validation_alias
    choices = getattr(alias, "choices", None)
    if choices:
        return [c for c in choices if isinstance(c, str) and c.isupper()]
    return [ENV_PREFIX + name.upper()]


def _setting_section(name: str, field: FieldInfo) -> str:
    variables = ", ".join(f"`{v}`" for v in setting_variables(name, field))
    lines = [
        f"## `{name}`\n",
        _text(field.description or "") + "\n",
        f"- type: `{_type_name(field.annotation)}`",
        f"- default: {_default(name, field)}",
        f"- environment: {variables}",
    ]
    for model in _models_in(field.annotation):
        lines.append(f"- each `{model.__name__}` holds:")
        for key, inner in model.model_fields.items():
            about = f": {_text(inner.description)}" if inner.description else ""
            need = "" if inner.is_required() else f", default {_default(key, inner)}"
            lines.append(f"    - `{key}` (`{_type_name(inner.annotation)}`{need}){about}")
    lines.append("")
    return "\n".join(lines)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a setting's type holds (a table of ``ModelPrice`` by model)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in get_args(annotation) for model in _models_in(argument)]


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    # typing's repr, without module paths: "pydantic.types.SecretStr | None" -> "SecretStr | None"
    return re.sub(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)", r"\1", repr(annotation))


def _default(name: str, field: FieldInfo) -> str:
    if name in _LOADER_DEFAULTS:
        return _LOADER_DEFAULTS[name]
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "none: required"
    else:
        value = field.default
    if value is None:
        return "none"
    if isinstance(value, Path):
        value = str(value)
    return f"`{json.dumps(value)}`"
