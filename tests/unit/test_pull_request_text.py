"""The pull request's title and body thirdshift publishes from the agent's Pull request file
(or without one), and the link to the Run's page they end with once ``public_url`` is set."""

from __future__ import annotations

from thirdshift.issue_url import IssueRef
from thirdshift.runs.rules.prompts import fallback_pull_request, pull_request_text, with_run_page
from thirdshift.scrub import Scrubber

REF = IssueRef("github.com", "acme", "widgets", 7)
PAGE = "https://thirdshift.example.org/runs/12"


def test_without_a_run_page_the_texts_are_as_they_always_were() -> None:
    assert pull_request_text("Fix add()\n\nIt adds now.", REF, Scrubber()) == (
        "Fix add()",
        "It adds now.\n\nCloses #7",
    )
    assert fallback_pull_request(REF) == ("Fix #7", "Closes #7")
    assert with_run_page("Closes #7", None) == "Closes #7"


def test_the_body_ends_with_the_run_s_page_after_thirdshift_s_closing_line() -> None:
    """The link is thirdshift's own line, added after the agent's text was defanged; a
    closing keyword the agent wrote stays inert."""
    title, body = pull_request_text("Fix add()\n\nFixes #8 too.", REF, Scrubber(), PAGE)

    assert title == "Fix add()"
    assert body.endswith(
        "\n\nCloses #7\n\nThe Run behind this pull request, on thirdshift's status page: "
        "https://thirdshift.example.org/runs/12"
    )
    assert "Fixes #8" not in body  # defanged as before
    assert fallback_pull_request(REF, PAGE) == (
        "Fix #7",
        f"Closes #7\n\nThe Run behind this pull request, on thirdshift's status page: {PAGE}",
    )
