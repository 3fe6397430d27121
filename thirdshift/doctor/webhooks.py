"""The webhook lines of ``thirdshift doctor``: with ``webhook_secret`` set, whether a GitHub
webhook sends the daemon its Webhook deliveries, judged from the hooks GitHub lists (a
repository's, an organisation's) and their newest deliveries, read behind ``HookReader``.

A hook counts when its URL's path ends in ``/webhook`` (the settings hold no address the daemon
is reached at, so only the path is compared). Never a failure: without a hook the backstop polls
still see every change, only later.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from thirdshift.doctor.check import Check, skipped, split_fix
from thirdshift.errors import GitHubError, NotFound, ThirdshiftError
from thirdshift.records import HookDelivery, Webhook
from thirdshift.settings import Settings, check_repository_name

WEBHOOK_EVENTS = (
    "issues",
    "issue_comment",
    "pull_request_review",
    "pull_request_review_comment",
    "check_run",
    "check_suite",
    "sub_issues",
)
"""The events whose Webhook deliveries wake a Poll (docs/daemon.md, Webhooks); a hook sends
``ping`` whatever it is subscribed to."""

RECENT_DELIVERIES = 10
"""How many of a hook's newest deliveries must have succeeded."""


class HookReader(Protocol):
    """What the webhook lines need from GitHub. Each method raises a ``ThirdshiftError``."""

    def webhooks(self, settings: Settings, owner: str, name: str | None) -> tuple[Webhook, ...]:
        """The webhooks of ``owner/name``, or (``name`` None, asked with a token only) of the
        organisation ``owner``; NotFound or a 403 GitHubError when the credentials may not
        read them."""
        ...

    def webhook_deliveries(
        self, settings: Settings, owner: str, name: str | None, hook_id: int, limit: int
    ) -> tuple[HookDelivery, ...]:
        """The newest ``limit`` deliveries GitHub recorded for that hook, newest first."""
        ...


@dataclass(frozen=True)
class _Judged:
    """A hook that sends to a path ending in ``/webhook``, with what is wrong with it (each a
    problem and its fix) and what its deliveries showed."""

    hook: Webhook
    whose: str
    problems: tuple[tuple[str, str], ...]
    deliveries: str


@dataclass(frozen=True)
class _Hooks:
    """One read of a repository's or an organisation's hooks: the ones judged, or why they
    cannot be read (``unreadable``: the credentials may not; ``error``: anything else)."""

    judged: tuple[_Judged, ...] = ()
    unreadable: str = ""
    error: ThirdshiftError | None = None


SET_UP_A_HOOK = (
    "payload URL https://<the address GitHub reaches this daemon at>/webhook, content type "
    "application/json, the secret webhook_secret, and the events docs/daemon.md names "
    "(Webhooks)"
)


def check_webhooks(
    outside: HookReader, settings: Settings, repositories: Sequence[str], github: Sequence[Check]
) -> list[Check]:
    """With ``webhook_secret`` set: for each repository a ``webhook OWNER/NAME`` line, and one
    ``webhook OWNER`` line for each of ``owners`` (an organisation's hook), judging the hooks
    that send to a path ending in ``/webhook``. Never a failure: the backstop polls work
    without any hook, so what is wrong is a WARN, and a hook the credentials may not read a
    SKIP. ``github`` is what ``check_github`` found."""
    if settings.webhook_secret is None:
        return []
    passed = {check.name for check in github if check.status == "PASS"}
    names = [*repositories, *settings.owners]
    if "github" not in passed:
        return [skipped(f"webhook {n}", "the GitHub credentials do not work") for n in names]
    organisations: dict[str, _Hooks] = {}

    def organisation(owner: str) -> _Hooks:
        # Read once per owner: its hook serves each of its repositories.
        if owner.lower() not in organisations:
            organisations[owner.lower()] = _read_hooks(outside, settings, owner, None)
        return organisations[owner.lower()]

    by_app = settings.github_app_id is not None
    found: list[Check] = []
    for full_name in repositories:
        if f"repository {full_name}" not in passed:
            why = f"the repository check of {full_name} did not pass"
            found.append(skipped(f"webhook {full_name}", why))
            continue
        owner, name = check_repository_name(full_name)
        own = _read_hooks(outside, settings, owner, name)
        # An App's deliveries come from its own webhook; its organisation's are not read.
        theirs = None if by_app else organisation(owner)
        found.append(_repository_webhook(full_name, own, theirs, by_app=by_app))
    for owner in settings.owners:
        if by_app:
            found.append(skipped(f"webhook {owner}", "owners are watched with a token only"))
        else:
            found.append(_owner_webhook(owner, organisation(owner)))
    return found


def _repository_webhook(
    full_name: str, own: _Hooks, organisation: _Hooks | None, *, by_app: bool
) -> Check:
    name = f"webhook {full_name}"
    serving = (*own.judged, *(organisation.judged if organisation is not None else ()))
    if serving:
        return _judged_check(name, serving)
    if own.error is not None:
        problem, fix = split_fix(str(own.error))
        return Check(name, "WARN", f"cannot tell: {problem}", fix)
    if own.unreadable:
        return skipped(name, own.unreadable)
    if by_app:
        return skipped(
            name,
            f"no hook of {full_name} sends to a URL ending in /webhook, and a GitHub App's own "
            "webhook (the App's settings), which may, cannot be read with its installation",
        )
    owner = full_name.partition("/")[0]
    nor = (
        f"nor of the organisation {owner}"
        if organisation is not None and not organisation.unreadable and organisation.error is None
        else f"and no organisation hook of {owner} could be read"
    )
    return Check(
        name,
        "WARN",
        f"no hook of {full_name} ({nor}) sends deliveries to a URL ending in /webhook: the "
        "daemon sees changes at its polls only",
        f"add one in the repository's Settings, Webhooks (or the organisation's): {SET_UP_A_HOOK}",
    )


def _owner_webhook(owner: str, found: _Hooks) -> Check:
    name = f"webhook {owner}"
    if found.judged:
        return _judged_check(name, found.judged)
    if found.error is not None:
        problem, fix = split_fix(str(found.error))
        return Check(name, "WARN", f"cannot tell: {problem}", fix)
    if found.unreadable:
        return skipped(name, found.unreadable)
    return Check(
        name,
        "WARN",
        f"no hook of the organisation {owner} sends deliveries to a URL ending in /webhook: "
        "only repositories with a hook of their own wake the daemon at once",
        f"add one in the organisation's Settings, Webhooks: {SET_UP_A_HOOK}",
    )


def _judged_check(name: str, serving: Sequence[_Judged]) -> Check:
    """PASS on the first hook with nothing wrong; else a WARN naming the first one's faults."""
    for judged in serving:
        if not judged.problems:
            return Check(
                name,
                "PASS",
                f"{_hook_named(judged)} sends the events the daemon needs, signed; "
                f"{judged.deliveries}",
            )
    judged = serving[0]
    problems = "; ".join(problem for problem, _ in judged.problems)
    fixes = "; ".join(fix for _, fix in judged.problems)
    return Check(name, "WARN", f"{_hook_named(judged)}: {problems}", fixes)


def _hook_named(judged: _Judged) -> str:
    return f"hook {judged.hook.id} ({judged.whose}) to {_shown_url(judged.hook.url)}"


def _read_hooks(outside: HookReader, settings: Settings, owner: str, name: str | None) -> _Hooks:
    """The hooks of ``owner/name`` (or of the organisation) that send to the daemon's path,
    each judged with its newest deliveries."""
    if name is not None:
        whose, where = "the repository's", f"{owner}/{name}"
        needs = "that needs admin on the repository, or the GitHub App's Webhooks read permission"
    else:
        whose, where = f"the organisation {owner}'s", f"the organisation {owner}"
        needs = (
            "that needs an owner of the organisation (with a classic token, its admin:org_hook "
            "scope), and a user's account has no such hooks"
        )
    try:
        hooks = outside.webhooks(settings, owner, name)
    except GitHubError as error:
        if isinstance(error, NotFound) or error.status == 403:
            return _Hooks(unreadable=f"the credentials may not read the hooks of {where}: {needs}")
        return _Hooks(error=error)
    except ThirdshiftError as error:
        return _Hooks(error=error)
    judged = [
        _judge(outside, settings, owner, name, hook, whose)
        for hook in hooks
        if urllib.parse.urlsplit(hook.url).path.endswith("/webhook")
    ]
    return _Hooks(judged=tuple(judged))


def _judge(
    outside: HookReader, settings: Settings, owner: str, name: str | None, hook: Webhook, whose: str
) -> _Judged:
    problems: list[tuple[str, str]] = []
    if not hook.active:
        problems.append(("it is not active", "tick Active in the hook's settings on GitHub"))
    if hook.content_type != "json":
        problems.append(
            (
                f"its content type is {hook.content_type}, and the daemon reads JSON only",
                "set its Content type to application/json",
            )
        )
    if not hook.has_secret:
        problems.append(
            (
                "it has no secret, so the daemon refuses its deliveries (401)",
                "set its Secret to webhook_secret",
            )
        )
    missing = [] if "*" in hook.events else [e for e in WEBHOOK_EVENTS if e not in hook.events]
    if missing:
        problems.append(
            (
                f"it does not send {', '.join(missing)}",
                "tick the events docs/daemon.md names (Webhooks) under Let me select "
                "individual events",
            )
        )
    try:
        recent = outside.webhook_deliveries(settings, owner, name, hook.id, RECENT_DELIVERIES)
    except ThirdshiftError as error:
        said, _ = split_fix(str(error))
        return _Judged(hook, whose, tuple(problems), f"its deliveries cannot be read: {said}")
    failed = [delivery for delivery in recent if not delivery.succeeded]
    if failed:
        problems.append((_failures(recent, failed), _REDELIVER))
    if not recent:
        said = "GitHub recorded no delivery of it in the last 30 days"
    elif len(recent) == 1:
        said = f"its one delivery succeeded, at {_at(recent[0])}"
    else:
        said = f"its last {len(recent)} deliveries succeeded, the newest at {_at(recent[0])}"
    return _Judged(hook, whose, tuple(problems), said)


_REDELIVER = (
    "check the daemon's --http address and the proxy in front of it (docs/daemon.md, "
    "Webhooks), then press Redeliver on the failed ones in the hook's Recent Deliveries on "
    "GitHub"
)


def _failures(recent: Sequence[HookDelivery], failed: Sequence[HookDelivery]) -> str:
    """``its last delivery (issues.labeled) failed with status 502 at ...``, and how many of
    the newest failed; or, when the newest succeeded, how many failed before it."""
    latest = failed[0]
    answer = (
        f"status {latest.status_code}"
        if latest.status_code
        else f"no answer ({latest.status or 'not reached'})"
    )
    failure = f"({latest.what}) failed with {answer} at {_at(latest)}"
    if latest is recent[0]:
        more = f" ({len(failed)} of its last {len(recent)} failed)" if len(failed) > 1 else ""
        return f"its last delivery {failure}{more}"
    return (
        f"{len(failed)} of its last {len(recent)} deliveries failed, the latest {failure}, "
        f"though the newest, at {_at(recent[0])}, succeeded"
    )


def _at(delivery: HookDelivery) -> str:
    return _utc(delivery.delivered_at).strftime("%Y-%m-%d %H:%M UTC")


def _utc(at: datetime) -> datetime:
    return at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _shown_url(url: str) -> str:
    """The hook's URL without what may be a credential (its user, password and query)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))
