"""Defanging: a corpus of hostile texts an agent could write, each made inert, and the code,
addresses and own references it must leave as written."""

from __future__ import annotations

import pytest

from thirdshift.defang import (
    ZERO_WIDTH,
    closed_elsewhere,
    defanged,
    defanged_title,
    pull_request_body,
)
from thirdshift.runs.claims import CLAIM_MARKER
from thirdshift.runs.failed_run import COMMENT_MARKER
from thirdshift.runs.rules.base_fixes import BASE_FIX_MARKER_PREFIX
from thirdshift.runs.rules.published_issues import marker
from thirdshift.runs.rules.review import REPLY_MARKER_PREFIX
from thirdshift.scrub import Scrubber

Z = ZERO_WIDTH
HERE = "octo/calc"

MENTIONS = [
    ("cc @maintainer", f"cc @{Z}maintainer"),
    ("cc @acme/core", f"cc @{Z}acme/core"),
    ("(@Mona)", f"(@{Z}Mona)"),
    ("**@mona**", f"**@{Z}mona**"),
    ("\\@mona", f"\\@{Z}mona"),
    ("&#64;mona", f"@{Z}mona"),
    ("&#064mona", f"@{Z}mona"),
    ("&#x40;mona", f"@{Z}mona"),
    ("&#X0040;acme/core", f"@{Z}acme/core"),
    ("&commat;mona", f"@{Z}mona"),
    ("line\n@mona", f"line\n@{Z}mona"),
    ("`code` @mona", f"`code` @{Z}mona"),
]


@pytest.mark.parametrize(("written", "published"), MENTIONS, ids=[m[0] for m in MENTIONS])
def test_no_user_or_team_is_mentioned_however_the_at_is_spelled(
    written: str, published: str
) -> None:
    assert defanged(written) == published


ELSEWHERE = [
    ("acme/priv#1", f"acme/priv#{Z}1"),
    ("see Acme/Priv.js#12.", f"see Acme/Priv.js#{Z}12."),
    ("https://github.com/acme/priv/issues/1", f"https://{Z}github.com/acme/priv/issues/1"),
    ("HTTP://GITHUB.COM/acme/priv/pull/7", f"HTTP://{Z}GITHUB.COM/acme/priv/pull/7"),
    ("[x](https://github.com/a/b/issues/3)", f"[x](https://{Z}github.com/a/b/issues/3)"),
]


@pytest.mark.parametrize(("written", "published"), ELSEWHERE, ids=[e[0] for e in ELSEWHERE])
def test_no_reference_to_another_repository_s_issues_is_left_linked(
    written: str, published: str
) -> None:
    assert defanged(written, HERE) == published


def test_references_to_the_run_s_own_repository_stay_links() -> None:
    text = "see #5, octo/calc#6 and https://github.com/Octo/Calc/issues/7"
    assert defanged(text, HERE) == text
    # Without a repository named, every address is another's (the Architect's rule).
    assert defanged("octo/calc#6") == f"octo/calc#{Z}6"


CLOSING = [
    "close #2",
    "Closes #2",
    "CLOSED #2",
    "fix #2",
    "Fixes: #2",
    "fixed  #2",
    "resolve #2",
    "Resolves acme/priv#1",
    "resolved GH-4",
    "fixes https://github.com/acme/priv/issues/1",
    "fixes **#2**",
    "closes [#2](https://example.com)",
    "fixes &#35;2",
    "fixes calc#2",
]


@pytest.mark.parametrize("written", CLOSING)
def test_no_closing_keyword_of_github_s_list_closes_anything(written: str) -> None:
    published = defanged(written, HERE)
    assert published[0] + Z == published[:2]  # the keyword broken after its first letter
    assert published.replace(Z, "") == written


@pytest.mark.parametrize(
    "text",
    ["This fixes the bug.", "Closed over the loop", "prefix #2", "unfixed #2", "fix-up #2"],
)
def test_keywords_that_close_nothing_are_left_as_written(text: str) -> None:
    assert defanged(text) == text


def test_a_closing_keyword_in_code_is_broken_too_but_mentions_in_code_are_not() -> None:
    text = "```\ngit commit -m 'Fixes #2' # @mona\n```\n`closes #3 @mona`"
    published = defanged(text)
    assert published == (f"```\ngit commit -m 'F{Z}ixes #2' # @mona\n```\n`c{Z}loses #3 @mona`")


@pytest.mark.parametrize(
    "mark",
    [
        CLAIM_MARKER,
        COMMENT_MARKER,
        f"{REPLY_MARKER_PREFIX}:3 -->",
        f"{BASE_FIX_MARKER_PREFIX}main:tests -->",
        marker("41", "spec", "d1" * 32),
        "<!--thirdshift:claim-->",
        "<!--  ThirdShift:failed-run -->",
    ],
)
def test_nothing_reads_as_a_thirdshift_marker_in_text_or_code(mark: str) -> None:
    for text in (mark, f"`{mark}`", f"```\n{mark}\n```", f"> {mark}"):
        published = defanged(text)
        assert "<!-- thirdshift" not in published.lower()
        for known in (CLAIM_MARKER, COMMENT_MARKER, REPLY_MARKER_PREFIX, BASE_FIX_MARKER_PREFIX):
            assert known not in published


def test_code_is_left_as_written_where_github_renders_code_and_only_there() -> None:
    text = (
        "```python\n@dataclass\nclass A: ...  # acme/priv#1\n```\n"
        "`npm i @types/node` and ``a ` @b``\n"
        "``` @mona\n"  # three backticks inside a line open nothing
        "unclosed `@mona"
    )
    assert defanged(text) == (
        "```python\n@dataclass\nclass A: ...  # acme/priv#1\n```\n"
        "`npm i @types/node` and ``a ` @b``\n"
        f"``` @{Z}mona\n"
        f"unclosed `@{Z}mona"
    )


def test_defanging_twice_changes_nothing_more() -> None:
    text = "Fixes #2, cc @mona @acme/core, acme/priv#1 " + CLAIM_MARKER
    once = defanged(text, HERE)
    assert defanged(once, HERE) == once


def test_the_pull_request_body_closes_its_own_issue_exactly_once_and_nothing_else() -> None:
    written = (
        "Adds the feature. Also fixes #2 and closes acme/priv#1.\n"
        "cc @maintainer @acme/core\n\n"
        "Closes #7\n"
        "- Fixes: #7.\n"
        f"{CLAIM_MARKER}\n"
    )
    body = pull_request_body(written, 7, HERE)
    assert body.count("#7") == 1
    assert body.endswith("\n\nCloses #7")
    assert f"f{Z}ixes #2" in body
    assert f"c{Z}loses acme/priv#{Z}1" in body
    assert f"@{Z}maintainer @{Z}acme/core" in body
    assert CLAIM_MARKER not in body
    # Another issue's line stays, broken.
    assert pull_request_body("Closes #70", 7) == f"C{Z}loses #70\n\nCloses #7"


def test_an_inline_closing_of_its_own_issue_is_broken_so_only_thirdshift_s_counts() -> None:
    body = pull_request_body("This resolves #7 by adding X.", 7)
    assert body == f"This r{Z}esolves #7 by adding X.\n\nCloses #7"
    assert pull_request_body("", 7) == "Closes #7"


def test_a_title_is_one_defanged_line_within_github_s_limit() -> None:
    assert defanged_title("Fix #2 for @mona\nand acme/priv#1", HERE) == (
        f"F{Z}ix #2 for @{Z}mona and acme/priv#{Z}1"
    )
    crowded = defanged_title("@a " * 200)
    assert len(crowded) <= 250
    assert "@a" not in crowded
    # Cut before defanging: a span cut open is defanged as the text it then renders as.
    assert defanged_title("x" * 245 + " `@mona`") == "x" * 245 + f" `@{Z}m"


def test_a_commit_message_closing_other_issues_is_told_apart_from_one_closing_its_own() -> None:
    message = (
        "Make add() add\n\nFixes #7, fixes #2 and Closes: acme/priv#1; resolves GH-3,\n"
        "closes https://github.com/octo/calc/issues/7 and https://github.com/acme/priv/pull/4 "
        "(resolved octo/calc#7, fix https://github.com/acme/priv/pull/4)"
    )
    assert closed_elsewhere(message, 7, HERE) == (
        "#2",
        "acme/priv#1",
        "GH-3",
        "https://github.com/acme/priv/pull/4",  # the "fix", not the "and", closes it
    )
    assert closed_elsewhere("Fixes #7 and mentions #2", 7, HERE) == ()
    assert closed_elsewhere("prefix #2, unfixed #3", 7, HERE) == ()
    assert closed_elsewhere("and https://github.com/acme/priv/pull/4", 7, HERE) == ()


def test_scrubbing_comes_first_since_defanging_would_hide_a_secret_from_the_scrubber() -> None:
    """A known value with an @ or an owner/repo#n in it: defanged first, its zero-width
    spaces split it and the scrubber no longer knows it."""
    secret = "hunter2-@dmin/vault#42"
    scrub = Scrubber([secret])
    said = f"the CLI said: {secret}"
    assert defanged(scrub(said)) == "the CLI said: [REDACTED]"
    assert scrub(defanged(said)).replace(Z, "") == said  # the reverse order leaks it


FLOODS = {
    "a keyword before a flood of word characters": "fixes " + "a" * 1_000_000,
    "backtick runs of growing length": "".join("`" * k + "x" for k in range(1, 1400)),
    "fences of shrinking length": "".join("`" * k + "\n" for k in range(1400, 2, -1)),
    "a fence and many that close nothing": "```\n" + "~~~a\n" * 200_000,
    "mentions": "@a " * 330_000,
    "references elsewhere": "a/b#1 " * 160_000,
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("flood", FLOODS.values(), ids=FLOODS.keys())
def test_a_megabyte_flood_is_defanged_in_linear_time(flood: str) -> None:
    """Quadratic matching would hold a Run for minutes on these (the timeout fails it), where
    linear takes about a second."""
    pull_request_body(flood, 7, HERE)
    closed_elsewhere(flood, 7, HERE)
