"""``thirdshift setup``'s rules: the commented configuration file, edited in place without
losing a byte of what a person wrote, and the labels thirdshift uses."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from thirdshift.bootstrap.setup import write_config
from thirdshift.cli import main
from thirdshift.errors import ConfigError, ThirdshiftError
from thirdshift.settings import Settings, load_settings
from thirdshift.setup import config_text, thirdshift_labels, with_repository

REPO = "acme/widgets"
WHERE = Path("config.toml")
USERS = """\
# my own notes, kept
max_runs = 3  # two was too few

repositories = [
    "acme/gadgets",  # the old one
]

[model_prices."my-model"]
input = 1.5
output = 6.0
"""


def test_the_new_file_shows_every_setting_at_its_default_and_sets_only_the_repository() -> None:
    """Each setting but home (set by THIRDSHIFT_HOME) is listed, commented out, so a later
    release's defaults still apply; the repository is the one live value."""
    text = with_repository(None, REPO, WHERE)
    assert tomllib.loads(text) == {"repositories": [REPO]}
    for name in Settings.model_fields:
        if name not in ("home", "repositories"):
            assert f"\n# {name} = " in text, name
    assert '\nrepositories = ["acme/widgets"]\n' in text
    assert "\n# max_runs = 2\n" in text
    assert '\n# excluded_labels = ["needs-triage", "needs-info", "ready-for-human", "wontfix"]' in (
        text
    )
    assert "\n# github_token = (a secret: set THIRDSHIFT_GITHUB_TOKEN in the environment)" in text
    assert "home =" not in text


def test_the_file_as_written_is_read_back_as_the_defaults(tmp_path: Path) -> None:
    """The file passes the strict loader: no unknown key, nothing but the repository set."""
    (tmp_path / "config.toml").write_text(with_repository(None, REPO, WHERE))
    settings = load_settings({"THIRDSHIFT_HOME": str(tmp_path)})
    assert settings.repositories == [REPO]
    assert settings.max_runs == Settings(home=tmp_path).max_runs


def test_a_second_pass_changes_no_byte() -> None:
    once = with_repository(None, REPO, WHERE)
    assert with_repository(once, REPO, WHERE) == once
    assert with_repository(once, REPO.upper(), WHERE) == once  # GitHub ignores the case


def test_an_existing_file_keeps_its_values_and_comments_and_gains_what_it_lacked(
    tmp_path: Path,
) -> None:
    """What the person wrote stays byte for byte; the repository joins their list; the
    settings they never mentioned are added commented out, before the first table."""
    edited = with_repository(USERS, REPO, WHERE)
    head, table = USERS.split('[model_prices."my-model"]')
    assert edited.startswith(
        head.replace("  # the old one\n", '  # the old one\n    "acme/widgets",\n')
    )
    assert edited.endswith('[model_prices."my-model"]' + table)
    assert edited.index("# ci_poll_seconds = 10") < edited.index("[model_prices")
    assert "# max_runs = " not in edited  # set by the person: not listed twice
    (tmp_path / "config.toml").write_text(edited)
    settings = load_settings({"THIRDSHIFT_HOME": str(tmp_path)})
    assert settings.repositories == ["acme/gadgets", REPO]
    assert settings.max_runs == 3
    assert settings.model_prices["my-model"].input == 1.5
    assert with_repository(edited, REPO, WHERE) == edited


def test_a_file_without_repositories_gets_the_key_before_its_first_table() -> None:
    text = with_repository('harness = "codex"\n\n[harness_models]\ncodex = "o4"\n', REPO, WHERE)
    parsed = tomllib.loads(text)
    assert parsed["repositories"] == [REPO]
    assert parsed["harness_models"] == {"codex": "o4"}


def test_a_commented_out_repositories_line_below_a_table_is_not_where_the_key_goes() -> None:
    """A key written below a table header would belong to that table: the repository is
    listed at the top level, before the first table, and the commented line is left as it is."""
    original = (
        'harness = "codex"\n\n[model_prices."my-model"]\ninput = 1.5\noutput = 6.0\n'
        "# repositories = []\n"
    )
    text = with_repository(original, REPO, WHERE)
    parsed = tomllib.loads(text)
    assert parsed["repositories"] == [REPO]
    assert parsed["model_prices"] == {"my-model": {"input": 1.5, "output": 6.0}}
    assert text.endswith("# repositories = []\n")


def test_a_file_that_is_not_toml_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"^config.toml: not valid TOML .*fix or move the file"):
        with_repository("max_runs = = 3\n", REPO, WHERE)


def test_the_template_alone_sets_nothing() -> None:
    assert tomllib.loads(config_text()) == {}


def test_the_labels_are_those_the_settings_name_each_once(tmp_path: Path) -> None:
    """The Ready, in-progress and merge labels as configured, and the Architect run's; a
    name given twice (in any case) is one label."""
    settings = Settings(home=tmp_path, in_progress_label="Needs-Triage", merge_label="ship-it")
    names = [label.name for label in thirdshift_labels(settings)]
    assert names == [
        "ready-for-agent",
        "Needs-Triage",
        "ship-it",
        "architect-plan",
        "architect-idea",
    ]
    assert all(len(label.color) == 6 for label in thirdshift_labels(settings))


def test_writing_the_file_says_what_it_did_and_writes_nothing_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "home" / "config.toml"
    assert write_config(path, REPO) == "written"
    written = path.read_bytes()
    assert write_config(path, REPO) == "unchanged"
    assert path.read_bytes() == written
    assert write_config(path, "acme/gadgets") == "updated"
    assert tomllib.loads(path.read_text())["repositories"] == [REPO, "acme/gadgets"]


def test_a_home_that_cannot_hold_the_file_is_named_with_the_fix(tmp_path: Path) -> None:
    """A home below a file (no directory can be made there, even by root) fails with the
    path and what to do."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    path = blocker / "home" / "config.toml"
    with pytest.raises(ThirdshiftError) as raised:
        write_config(path, REPO)
    assert str(raised.value) == (
        f"cannot write the configuration file {path}: Not a directory; make its directory "
        "writable, or set THIRDSHIFT_HOME to a directory you can write"
    )
    assert blocker.read_text() == "not a directory"


def test_a_configuration_path_that_is_a_directory_is_refused_and_left_alone(
    tmp_path: Path,
) -> None:
    """A configuration path that is a directory cannot be read: it is named, and nothing in it
    changes (a write failing midway is the test below)."""
    path = tmp_path / "config.toml"
    path.mkdir()
    with pytest.raises(ThirdshiftError, match="cannot read"):
        write_config(path, REPO)
    assert list(path.iterdir()) == []


WRITE_UNDER_A_FILE_SIZE_LIMIT = """
import resource, signal, sys
from pathlib import Path
from thirdshift.bootstrap.setup import write_config
from thirdshift.errors import ThirdshiftError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))
try:
    write_config(Path(sys.argv[1]), sys.argv[2])
except ThirdshiftError as error:
    print(error)
"""


def test_a_write_that_fails_midway_leaves_the_old_file_whole_and_no_copy_behind(
    tmp_path: Path,
) -> None:
    """The new text goes to a copy that replaces the file in one step: when the disk refuses
    the copy (here a file-size limit, as a full disk would), the old file is untouched, the
    error names it with the fix, and the half-written copy is removed."""
    path = tmp_path / "home" / "config.toml"
    write_config(path, REPO)
    before = path.read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", WRITE_UNDER_A_FILE_SIZE_LIMIT, str(path), "acme/gadgets"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.startswith(f"cannot write the configuration file {path}: File too large")
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.toml"]


def test_setup_needs_owner_slash_name() -> None:
    result = CliRunner().invoke(main, ["setup", "--repo", "widgets"])
    assert result.exit_code == 2
    assert "--repo: 'widgets' is not OWNER/NAME" in result.stderr
