"""Validate recorded GitHub REST exchanges against GitHub's own OpenAPI description.

The contract suite records every request the GitHub stand-in answers and hands each
exchange to :meth:`OpenAPIDescription.validate_exchange`.  The description is the one
published by GitHub (npm ``@octokit/openapi``, OpenAPI 3.0.3); any response the
stand-in produces that GitHub's description would not allow raises
:class:`ContractViolation`, so drift between the stand-in and real GitHub fails a test
instead of going unnoticed.

Over 500 lines on purpose: an OpenAPI 3.0 subset (references, composition, nullable, formats)
that only reads well whole.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from jsonschema import FormatChecker
from jsonschema.exceptions import ValidationError, best_match
from jsonschema.validators import extend
from openapi_schema_validator import OAS30ReadValidator, oas30_format_checker
from referencing import Registry
from referencing.jsonschema import DRAFT4

__all__ = [
    "ContractViolation",
    "OpenAPIDescription",
    "Operation",
    "description_path",
]

#: Where ``npm ci`` puts GitHub's description, relative to the repository root.
DESCRIPTION_RELATIVE_PATH = Path(
    "node_modules", "@octokit", "openapi", "generated", "api.github.com.json"
)

#: The base URI the whole description is registered under, so every ``$ref`` like
#: ``#/components/schemas/issue`` resolves inside the one document.
_DOCUMENT_URI = "urn:thirdshift:github-openapi"

_HTTP_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})

#: Path parameters whose values may contain ``/`` (git refs such as ``heads/main``,
#: file paths, branch names, label names, ``base...head`` pairs).  A parameter with one
#: of these names may swallow several segments; literal segments still win.
SLASHED_PARAMETERS = frozenset({"ref", "path", "branch", "basehead", "base", "head", "tag", "name"})

_PARAMETER = re.compile(r"\{([^{}]+)\}")
_RFC3339_DATE_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$"
)
_MATCH_CACHE_SIZE = 4096
_DETAILS_SHOWN = 5


class ContractViolation(AssertionError):
    """An exchange that GitHub's OpenAPI description does not allow."""

    def __init__(
        self,
        method: str,
        path: str,
        reason: str,
        *,
        status: int | None = None,
        operation_id: str | None = None,
        json_path: str | None = None,
        keyword: str | None = None,
    ) -> None:
        self.method = method.upper()
        self.path = path
        self.status = status
        self.operation_id = operation_id
        self.reason = reason
        self.json_path = json_path
        self.keyword = keyword
        exchange = f"{self.method} {path}"
        if status is not None:
            exchange += f" -> {status}"
        if operation_id is not None:
            exchange += f" (operation {operation_id})"
        super().__init__(f"{exchange}: {reason}")


def description_path() -> Path:
    """Return GitHub's OpenAPI description under the repository root, or fail loudly."""
    path = Path(__file__).resolve().parents[2] / DESCRIPTION_RELATIVE_PATH
    if not path.is_file():
        raise FileNotFoundError(
            f"GitHub's OpenAPI description is missing ({DESCRIPTION_RELATIVE_PATH.as_posix()} "
            "under the repository root). Run the install script, scripts/install, from the "
            "repository root (it runs `npm ci` for the pinned @octokit/openapi package); the "
            "contract suite never skips for want of it."
        )
    return path


@dataclass(frozen=True)
class Operation:
    """One operation of the description, as matched for a concrete request path."""

    operation_id: str
    method: str
    template: str
    params: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    definition: Mapping[str, Any] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )


# --------------------------------------------------------------------------- matching


@dataclass
class _Segment:
    """A template segment holding parameters: ``{owner}`` or ``{base}...{head}``."""

    text: str
    names: tuple[str, ...]
    regex: re.Pattern[str]
    slashed: bool
    plain: bool


def _compile_segment(text: str) -> _Segment:
    names = tuple(_PARAMETER.findall(text))
    slashed = any(name in SLASHED_PARAMETERS for name in names)
    pieces: list[str] = []
    position = 0
    for found in _PARAMETER.finditer(text):
        pieces.append(re.escape(text[position : found.start()]))
        pieces.append("(.+?)" if slashed else "([^/]+?)")
        position = found.end()
    pieces.append(re.escape(text[position:]))
    plain = len(names) == 1 and text == "{" + names[0] + "}"
    return _Segment(text, names, re.compile("".join(pieces)), slashed, plain)


@dataclass
class _Node:
    literals: dict[str, _Node] = field(default_factory=dict)
    parameters: dict[str, tuple[_Segment, _Node]] = field(default_factory=dict)
    ordered: list[tuple[_Segment, _Node]] = field(default_factory=list)
    template: str | None = None
    methods: frozenset[str] = frozenset()

    def freeze(self) -> None:
        # More specific first: a pattern with literal parts (``{base}...{head}``) beats a
        # bare parameter, and a one-segment parameter beats a slash-swallowing one.
        self.ordered = sorted(
            self.parameters.values(), key=lambda item: (item[0].slashed, item[0].plain)
        )
        for child in self.literals.values():
            child.freeze()
        for _, child in self.ordered:
            child.freeze()


def _is_deprecated(operation: Mapping[str, Any]) -> bool:
    description = operation.get("description") or ""
    return operation.get("deprecated") is True or description.startswith("**Deprecated**")


class _Router:
    """Path templates indexed as a tree of segments; literal segments are tried first."""

    def __init__(self, paths: Mapping[str, Mapping[str, Any]]) -> None:
        self._root = _Node()
        self._deprecated: set[tuple[str, str]] = set()
        for template, item in paths.items():
            node = self._root
            for text in template.split("/")[1:]:
                if "{" in text:
                    if text not in node.parameters:
                        node.parameters[text] = (_compile_segment(text), _Node())
                    node = node.parameters[text][1]
                else:
                    node = node.literals.setdefault(text, _Node())
            node.template = template
            node.methods = frozenset(key for key in item if key in _HTTP_METHODS)
            self._deprecated.update(
                (template, method) for method in node.methods if _is_deprecated(item[method])
            )
        self._root.freeze()

    def route(self, segments: list[str], method: str | None) -> tuple[str, dict[str, str]] | None:
        """The most specific template matching ``segments`` that defines ``method``.

        A deprecated alias (``/compare/{base}...{head}`` next to ``/compare/{basehead}``)
        never shadows the current operation it duplicates; it matches only alone.
        """
        fallback = None
        for template, params in self._walk(self._root, segments, 0, method):
            if method is None or (template, method) not in self._deprecated:
                return template, params
            if fallback is None:
                fallback = template, params
        return fallback

    def _walk(
        self, node: _Node, segments: list[str], index: int, method: str | None
    ) -> Iterator[tuple[str, dict[str, str]]]:
        if index == len(segments):
            if node.template is not None and (method is None or method in node.methods):
                yield node.template, {}
            return
        literal = node.literals.get(segments[index])
        if literal is not None:
            yield from self._walk(literal, segments, index + 1, method)
        for segment, child in node.ordered:
            last = len(segments) if segment.slashed else index + 1
            for end in range(index + 1, last + 1):
                found = segment.regex.fullmatch("/".join(segments[index:end]))
                if found is None:
                    continue
                for template, params in self._walk(child, segments, end, method):
                    params.update(zip(segment.names, found.groups(), strict=True))
                    yield template, params


# -------------------------------------------------------------------------- validation


def _is_date_time(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    if _RFC3339_DATE_TIME.match(instance) is None:
        return False
    try:
        datetime.fromisoformat(instance.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return False
    return True


def _is_date(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    try:
        date.fromisoformat(instance)
    except ValueError:
        return False
    return len(instance) == len("2000-01-01")


def _format_checker() -> FormatChecker:
    """OpenAPI 3.0's numeric formats plus the date formats GitHub uses on timestamps.

    ``uri``/``email`` are left unchecked: GitHub's own payloads carry values (URI
    templates, empty strings) that strict checkers would reject.
    """
    checker = FormatChecker(())
    checker.checkers = dict(oas30_format_checker.checkers)
    checker.checks("date-time")(_is_date_time)
    checker.checks("date")(_is_date)
    return checker


def _alternatives(
    validator: Any, alternatives: list[Any], instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    """``oneOf``/``anyOf`` as GitHub's description means them.

    GitHub writes ``oneOf`` over alternatives that overlap (``private-user`` is also a
    valid ``public-user``; every event payload with only ``action`` fits several event
    schemas), so real GitHub responses would fail strict "exactly one" semantics.  An
    instance therefore has to satisfy at least one alternative.  A ``discriminator`` is
    a hint (as OpenAPI 3.0 says): when the instance carries the discriminating property
    and it maps to one of the alternatives, the instance must satisfy that one; otherwise
    (say a directory listing, which is an array) all alternatives are tried.
    """
    discriminator = schema.get("discriminator")
    if isinstance(discriminator, Mapping) and validator.is_type(instance, "object"):
        value = instance.get(discriminator.get("propertyName"))
        if isinstance(value, str):
            mapping = discriminator.get("mapping") or {}
            ref = mapping.get(value, f"#/components/schemas/{value}")
            for index, alternative in enumerate(alternatives):
                if isinstance(alternative, Mapping) and alternative.get("$ref") == ref:
                    yield from validator.descend(instance, alternative, schema_path=index)
                    return
    errors: list[ValidationError] = []
    for index, alternative in enumerate(alternatives):
        found = list(validator.descend(instance, alternative, schema_path=index))
        if not found:
            return
        errors.extend(found)
    yield ValidationError(
        f"{_brief(instance)} is not valid under any of the given schemas", context=errors
    )


def _enum(
    validator: Any, values: list[Any], instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    """``enum``, where ``nullable: true`` admits ``null`` without listing it.

    GitHub writes ``{"type": "string", "enum": [...], "nullable": true}`` for values that
    are null in real responses (a check run's ``conclusion`` while it runs), so read
    ``nullable`` as widening the enum, as GitHub means it.
    """
    if instance is None and schema.get("nullable") is True:
        return
    yield from _BASE_ENUM(validator, values, instance, schema)


_BASE_ENUM: Any = OAS30ReadValidator.VALIDATORS["enum"]

#: Response validation: OpenAPI 3.0 semantics (``nullable``, ``readOnly``/``writeOnly``
#: for a response), with GitHub's overlapping ``oneOf`` read as :func:`_alternatives`
#: and nullable enums as :func:`_enum`.
_ResponseValidator: Any = extend(
    OAS30ReadValidator,
    validators={"oneOf": _alternatives, "anyOf": _alternatives, "enum": _enum},
)


def _brief(instance: Any, limit: int = 80) -> str:
    """A repr of ``instance`` short enough for one line of a failure message."""
    text = repr(instance)
    if len(text) <= limit:
        return text
    if isinstance(instance, Mapping):
        keys = ", ".join(str(key) for key in list(instance)[:6])
        more = ", ..." if len(instance) > 6 else ""
        return f"{{object with keys {keys}{more}}}"
    if isinstance(instance, list):
        return f"[array of {len(instance)} items]"
    return text[: limit - 3] + "..."


def _message(error: ValidationError) -> str:
    message = str(error.message)
    full = repr(error.instance)
    if message.startswith(full) and len(full) > 80:
        message = _brief(error.instance) + message[len(full) :]
    return message if len(message) <= 300 else message[:297] + "..."


def _media_type(content_type: str | None) -> str | None:
    if content_type is None:
        return None
    media = content_type.split(";", 1)[0].strip().lower()
    return media or None


def _is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


def _escape_pointer(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _status_keys(status: int) -> tuple[str, ...]:
    return (str(status), f"{status // 100}XX", "default")


@dataclass
class _Response:
    """One documented response of one operation, with validators built on demand."""

    key: str
    pointer: str
    content: Mapping[str, Any]
    validators: dict[str, Any] = field(default_factory=dict)


class OpenAPIDescription:
    """GitHub's REST description: match requests to operations, validate responses."""

    def __init__(self, document: Mapping[str, Any], source: Path | None = None) -> None:
        self.document = document
        self.source = source
        self._router = _Router(document["paths"])
        self._registry: Registry[Any] = Registry().with_resource(
            _DOCUMENT_URI, DRAFT4.create_resource(document)
        )
        self._format_checker = _format_checker()
        self._match_cache: dict[tuple[str, str], Operation | None] = {}
        self._responses: dict[tuple[str, str, str], _Response] = {}

    @classmethod
    def load(cls, path: Path | None = None) -> OpenAPIDescription:
        """The description at ``path`` (default: :func:`description_path`), parsed once."""
        return _load(path.resolve() if path is not None else description_path())

    # ---------------------------------------------------------------- matching

    def match(self, method: str, path: str) -> Operation:
        """The operation GitHub would route ``method path`` to (no query, no /api/v3)."""
        verb = method.lower()
        key = (verb, path)
        if key in self._match_cache:
            operation = self._match_cache[key]
        else:
            operation = self._match(verb, path)
            if len(self._match_cache) >= _MATCH_CACHE_SIZE:
                self._match_cache.clear()
            self._match_cache[key] = operation
        if operation is None:
            raise ContractViolation(method, path, self._undefined_reason(verb, path))
        return operation

    def _match(self, verb: str, path: str) -> Operation | None:
        routed = self._router.route(self._segments(path), verb)
        if routed is None:
            return None
        template, found = routed
        params = {name: found[name] for name in _PARAMETER.findall(template)}
        definition = self.document["paths"][template][verb]
        return Operation(
            operation_id=definition.get("operationId", f"{verb} {template}"),
            method=verb,
            template=template,
            params=params,
            definition=definition,
        )

    @staticmethod
    def _segments(path: str) -> list[str]:
        return path.split("?", 1)[0].split("/")[1:]

    def _undefined_reason(self, verb: str, path: str) -> str:
        reason = "request not defined by the description"
        routed = self._router.route(self._segments(path), None)
        if routed is not None:
            template = routed[0]
            methods = sorted(
                key.upper() for key in self.document["paths"][template] if key in _HTTP_METHODS
            )
            reason += f" (path template {template} defines only {', '.join(methods)})"
        return reason

    # -------------------------------------------------------------- validation

    def validate_exchange(
        self, method: str, path: str, status: int, body: bytes, content_type: str | None
    ) -> str:
        """Check one recorded response against the description; return its operationId."""
        operation = self.match(method, path)

        def violation(
            reason: str, json_path: str | None = None, keyword: str | None = None
        ) -> ContractViolation:
            return ContractViolation(
                method,
                path,
                reason,
                status=status,
                operation_id=operation.operation_id,
                json_path=json_path,
                keyword=keyword,
            )

        response = self._response(operation, status)
        if response is None:
            documented = ", ".join(operation.definition.get("responses", {}))
            raise violation(f"status {status} is not documented (documented: {documented})")
        if status in (204, 304) or 100 <= status < 200:
            if body:
                raise violation(
                    f"a {status} response must have an empty body, got {len(body)} bytes"
                )
            return operation.operation_id
        if not response.content:
            # Documented without content (a 302 with a Location header, say): any body
            # is incidental and nothing requires it to be JSON.
            return operation.operation_id

        media = self._choose_media(response, _media_type(content_type))
        if media is None:
            documented = ", ".join(response.content)
            raise violation(
                f"content type {content_type!r} is not documented for this status "
                f"(documented: {documented})"
            )
        if not _is_json(media) or "schema" not in response.content[media]:
            return operation.operation_id

        try:
            instance = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise violation(
                f"body is not JSON although {media} is documented ({error}); "
                f"body starts {body[:80]!r}"
            ) from None

        validator = self._validator(response, media)
        errors = list(validator.iter_errors(instance))
        if errors:
            best = best_match(errors)
            assert best is not None
            raise violation(self._describe(best, errors), best.json_path, str(best.validator))
        return operation.operation_id

    def _response(self, operation: Operation, status: int) -> _Response | None:
        responses: Mapping[str, Any] = operation.definition.get("responses", {})
        for key in _status_keys(status):
            if key not in responses:
                continue
            cache_key = (operation.method, operation.template, key)
            cached = self._responses.get(cache_key)
            if cached is None:
                pointer = "/".join(
                    (
                        "#/paths",
                        _escape_pointer(operation.template),
                        operation.method,
                        "responses",
                        key,
                    )
                )
                definition = responses[key]
                while "$ref" in definition:
                    pointer = definition["$ref"]
                    definition = self._resolve(pointer)
                cached = _Response(key, pointer, definition.get("content") or {})
                self._responses[cache_key] = cached
            return cached
        return None

    def _resolve(self, pointer: str) -> Mapping[str, Any]:
        node: Any = self.document
        for token in pointer.removeprefix("#/").split("/"):
            node = node[token.replace("~1", "/").replace("~0", "~")]
        return node  # type: ignore[no-any-return]

    @staticmethod
    def _choose_media(response: _Response, media: str | None) -> str | None:
        if media is not None and media in response.content:
            return media
        if media is None or _is_json(media):
            json_media = [candidate for candidate in response.content if _is_json(candidate)]
            if "application/json" in json_media:
                return "application/json"
            if json_media:
                return json_media[0]
            if media is None:
                # Unlabelled body, only non-JSON documented: nothing to hold it to.
                return next(iter(response.content))
        return None

    def _validator(self, response: _Response, media: str) -> Any:
        validator = response.validators.get(media)
        if validator is None:
            pointer = "/".join((response.pointer, "content", _escape_pointer(media), "schema"))
            validator = _ResponseValidator(
                {"$ref": _DOCUMENT_URI + pointer},
                registry=self._registry,
                format_checker=self._format_checker,
            )
            response.validators[media] = validator
        return validator

    @staticmethod
    def _describe(best: ValidationError, errors: list[ValidationError]) -> str:
        schema_path = "/".join(str(part) for part in best.absolute_schema_path)
        lines = [
            f"response body violates the documented schema at {best.json_path}: "
            f"{_message(best)} (keyword {best.validator!r}, schema path {schema_path})"
        ]
        by_alternative: dict[Any, list[ValidationError]] = {}
        for error in best.context or ():
            by_alternative.setdefault(error.relative_schema_path[0], []).append(error)
        for index, found in list(by_alternative.items())[:_DETAILS_SHOWN]:
            reason = best_match(found)
            assert reason is not None
            alternative = best.validator_value[index]
            name = (
                alternative.get("$ref", f"#{index}") if isinstance(alternative, Mapping) else index
            )
            lines.append(f"  alternative {name} fails at {reason.json_path}: {_message(reason)}")
        others = [error for error in errors if error is not best]
        for error in others[:_DETAILS_SHOWN]:
            lines.append(f"  also at {error.json_path}: {_message(error)}")
        if len(others) > _DETAILS_SHOWN:
            lines.append(f"  ... and {len(others) - _DETAILS_SHOWN} more")
        return "\n".join(lines)


@functools.lru_cache(maxsize=4)
def _load(path: Path) -> OpenAPIDescription:
    with path.open("rb") as handle:
        document = json.load(handle)
    return OpenAPIDescription(document, source=path)
