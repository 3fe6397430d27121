"""Settings: strict, layered, and never echoing a secret."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.app_keys import key_pair
from thirdshift.bootstrap import credential_secrets, setting_secrets, with_page_token
from thirdshift.errors import ConfigError
from thirdshift.scrub import Scrubber
from thirdshift.settings import PUBLIC_GITHUB_API, load_settings, with_harness


def test_defaults_put_everything_in_the_home(home: Path) -> None:
    """With no file and no variables, the database is SQLite in the home and GitHub is public."""
    settings = load_settings(os.environ)
    assert settings.home == home
    assert settings.effective_database_url == f"sqlite:///{home / 'thirdshift.db'}"
    assert settings.github_api_url == PUBLIC_GITHUB_API
    assert settings.github_token is None


def test_the_file_is_read_and_the_environment_wins(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """config.toml sets keys; a THIRDSHIFT_* variable overrides the same key."""
    (home / "config.toml").write_text(
        'database_url = "sqlite:///from-file.db"\ngithub_api_url = "http://file.example/api"\n'
    )
    monkeypatch.setenv("THIRDSHIFT_GITHUB_API_URL", "http://env.example/api")
    settings = load_settings(os.environ)
    assert settings.database_url == "sqlite:///from-file.db"
    assert settings.github_api_url == "http://env.example/api"


@pytest.mark.parametrize("variable", ["GITHUB_TOKEN", "THIRDSHIFT_GITHUB_TOKEN"])
def test_the_token_comes_from_either_variable_and_stays_hidden(
    home: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """The token is a secret value: readable on purpose, masked in every repr."""
    monkeypatch.setenv(variable, "ghp_exampleexampleexampleexample0000")
    settings = load_settings(os.environ)
    assert settings.github_token is not None
    assert settings.github_token.get_secret_value() == "ghp_exampleexampleexampleexample0000"
    assert "ghp_" not in repr(settings)
    assert "ghp_" not in str(settings.model_dump())


def test_an_unknown_key_in_the_file_names_the_file_and_the_key(home: Path) -> None:
    """A misspelt key stops everything with the file and key named, not a silent default."""
    (home / "config.toml").write_text('databse_url = "sqlite:///x.db"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(os.environ)
    assert str(home / "config.toml") in str(caught.value)
    assert "'databse_url'" in str(caught.value)
    assert "database_url" in str(caught.value)


def test_a_wrong_type_in_the_file_names_the_file_and_the_key(home: Path) -> None:
    """A value of the wrong type is reported against its key and file."""
    (home / "config.toml").write_text("github_api_url = 3\n")
    with pytest.raises(ConfigError, match=r"config\.toml: key 'github_api_url'"):
        load_settings(os.environ)


def test_an_error_never_echoes_the_offending_value(home: Path) -> None:
    """A wrong-typed token in the file is reported by key; its value may be a secret."""
    (home / "config.toml").write_text("github_token = 1234567890123\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(os.environ)
    assert "'github_token'" in str(caught.value)
    assert "1234567890123" not in str(caught.value)


def test_an_unknown_thirdshift_variable_is_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """THIRDSHIFT_DATABSE_URL is a typo, and a typo must not fall back to the default."""
    monkeypatch.setenv("THIRDSHIFT_DATABSE_URL", "postgresql://elsewhere/db")
    with pytest.raises(ConfigError, match="THIRDSHIFT_DATABSE_URL"):
        load_settings(os.environ)


def test_a_file_that_is_not_toml_is_named(home: Path) -> None:
    """Broken TOML reports the file and the parser's position."""
    (home / "config.toml").write_text("database_url = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(os.environ)


def test_the_home_cannot_be_moved_from_inside_itself(home: Path) -> None:
    """'home' in config.toml is refused with a pointer to THIRDSHIFT_HOME."""
    (home / "config.toml").write_text('home = "/elsewhere"\n')
    with pytest.raises(ConfigError, match="THIRDSHIFT_HOME"):
        load_settings(os.environ)


def test_session_limits_have_defaults_and_must_be_positive(home: Path) -> None:
    """The watchdogs default to generous limits; zero or negative is refused by key."""
    watchdogs = load_settings(os.environ).session_watchdogs
    assert watchdogs.post_result_seconds == 60
    assert watchdogs.idle_seconds == 1800
    (home / "config.toml").write_text("session_post_result_seconds = 0\n")
    with pytest.raises(ConfigError, match="'session_post_result_seconds'"):
        load_settings(os.environ)


def test_only_the_environment_given_is_read(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_settings reads the mapping the composition root hands it, never the process's."""
    monkeypatch.setenv("THIRDSHIFT_GITHUB_API_URL", "http://process.example/api")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_processprocessprocessprocess0000")
    given = {"THIRDSHIFT_HOME": str(home), "THIRDSHIFT_GITHUB_API_URL": "http://given.example/api"}
    settings = load_settings(given)
    assert settings.github_api_url == "http://given.example/api"
    assert settings.github_token is None


def test_watched_repositories_must_be_owner_slash_name(home: Path) -> None:
    (home / "config.toml").write_text('repositories = ["octo-org/widgets", "widgets"]\n')
    with pytest.raises(ConfigError) as caught:
        load_settings({"THIRDSHIFT_HOME": str(home)})
    assert "'widgets' is not OWNER/NAME (for example octo-org/widgets)" in str(caught.value)
    assert "config.toml: key 'repositories'" in str(caught.value)


def test_a_list_setting_given_as_plain_text_names_the_variable_and_the_json_form(
    home: Path,
) -> None:
    """A list in the environment is JSON; plain text is a clear error, not a traceback."""
    with pytest.raises(ConfigError) as caught:
        load_settings({"THIRDSHIFT_HOME": str(home), "THIRDSHIFT_REPOSITORIES": "octo/widgets"})
    assert str(caught.value) == (
        "environment variable THIRDSHIFT_REPOSITORIES: not valid JSON; a list is written as "
        """JSON, for example THIRDSHIFT_REPOSITORIES='["a", "b"]'"""
    )


def test_a_workflow_s_unset_app_secrets_mean_no_app_and_the_token_acts(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitHub passes a secret that is not set as an empty string: that is no App at all."""
    monkeypatch.setenv("THIRDSHIFT_GITHUB_APP_ID", "")
    monkeypatch.setenv("THIRDSHIFT_GITHUB_APP_PRIVATE_KEY", "")
    monkeypatch.setenv("THIRDSHIFT_GITHUB_LOGIN", "")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_workflowtokenworkflowtoken0123456789")
    settings = load_settings(os.environ)
    assert (settings.github_app_id, settings.github_app_private_key) == (None, None)
    assert settings.github_login is None
    assert credential_secrets(settings) == ["ghs_workflowtokenworkflowtoken0123456789"]


@pytest.mark.parametrize(
    ("variables", "says"),
    [
        ({"THIRDSHIFT_GITHUB_APP_ID": "42"}, "set THIRDSHIFT_GITHUB_APP_PRIVATE_KEY"),
        ({"THIRDSHIFT_GITHUB_APP_PRIVATE_KEY": "x" * 40}, "set THIRDSHIFT_GITHUB_APP_ID"),
        (
            {
                "THIRDSHIFT_GITHUB_APP_ID": "42",
                "THIRDSHIFT_GITHUB_APP_PRIVATE_KEY": "x" * 40,
                "THIRDSHIFT_GITHUB_APP_PRIVATE_KEY_FILE": "/nowhere/app.pem",
            },
            "given twice",
        ),
        (
            {
                "THIRDSHIFT_GITHUB_APP_ID": "42",
                "THIRDSHIFT_GITHUB_APP_PRIVATE_KEY_FILE": "/nowhere/app.pem",
            },
            "github_app_private_key_file /nowhere/app.pem: cannot be read",
        ),
        ({}, "no GitHub token: set GITHUB_TOKEN"),
    ],
)
def test_half_a_github_app_or_no_credentials_at_all_names_what_to_set(
    home: Path, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], says: str
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    settings = load_settings(os.environ)
    with pytest.raises(ConfigError) as caught:
        credential_secrets(settings)
    assert says in str(caught.value)
    assert "x" * 20 not in str(caught.value)


def test_the_app_s_key_is_known_to_the_scrubber_whole_and_line_by_line(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line of the key, quoted in some error or log, is scrubbed too; its frame lines are
    not secrets (they stand in documentation everywhere)."""
    private, _ = key_pair()
    key_file = home / "app.pem"
    key_file.write_text(private)
    monkeypatch.setenv("THIRDSHIFT_GITHUB_APP_ID", "42")
    monkeypatch.setenv("THIRDSHIFT_GITHUB_APP_PRIVATE_KEY_FILE", str(key_file))
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_ignoredwhenanappisthere0123456789ab")
    known = credential_secrets(load_settings(os.environ))
    body = private.strip().splitlines()[1:-1]
    assert known == [private, *body]
    scrub = Scrubber(known)
    assert body[3] not in scrub(f"error near {body[3]} in the key")
    assert "-----BEGIN RSA PRIVATE KEY-----" not in known


def test_a_served_page_without_http_token_gets_a_token_of_its_own_every_scrubber_knows(
    home: Path,
) -> None:
    """The daemon's status page always asks for a token: without http_token one is made for
    the process (another each time), and as a secret of the settings every scrubber built
    from them (the daemon's, each Run's) hides it."""
    settings = load_settings(os.environ)
    assert settings.http_token is None
    served, made = with_page_token(settings, served=True)
    assert made is not None
    assert len(made) >= 32
    assert served.http_token is not None
    assert served.http_token.get_secret_value() == made
    assert made not in repr(served)
    scrub = Scrubber(setting_secrets(served))
    assert scrub(f"GET /?token={made} 200") == "GET /?token=[REDACTED] 200"
    assert with_page_token(settings, served=True)[1] != made


def test_a_configured_http_token_is_the_page_s_and_none_is_made(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THIRDSHIFT_HTTP_TOKEN", "page-token-0123456789-abcdef")
    settings = load_settings(os.environ)
    assert with_page_token(settings, served=True) == (settings, None)
    assert with_page_token(load_settings({"THIRDSHIFT_HOME": str(home)}), served=False)[1] is None


def test_cost_budgets_and_model_prices_are_read_and_a_bad_price_names_its_model_and_key(
    home: Path,
) -> None:
    (home / "config.toml").write_text(
        "cost_budget_per_run_usd = 2.5\n[model_prices.gpt-x]\ninput = 1.25\noutput = 10\n"
    )
    settings = load_settings(os.environ)
    assert settings.cost_budget_per_run_usd == 2.5
    assert settings.cost_budget_per_repository_day_usd is None
    assert (settings.model_prices["gpt-x"].input, settings.model_prices["gpt-x"].output) == (
        1.25,
        10,
    )

    (home / "config.toml").write_text("[model_prices.gpt-x]\ninput = 1.25\nouptut = 10\n")
    with pytest.raises(ConfigError, match=r"key 'model_prices': gpt-x\.output: Field required"):
        load_settings(os.environ)
    (home / "config.toml").write_text("cost_budget_per_run_usd = 0\n")
    with pytest.raises(ConfigError, match=r"key 'cost_budget_per_run_usd': .*greater than 0"):
        load_settings(os.environ)


def test_each_harness_gets_its_own_model_and_never_another_s(home: Path) -> None:
    """harness_models wins; ``model`` belongs to the Run's own Harness only; a fallback with
    no entry gets its own default, never the Run's Harness's Model."""
    (home / "config.toml").write_text(
        'harness = "claude"\nmodel = "claude-sonnet-4-5"\nharness_fallbacks = ["codex", "claude"]\n'
    )
    settings = load_settings(os.environ)
    assert settings.model_for("claude") == "claude-sonnet-4-5"
    assert settings.model_for("codex") is None
    assert settings.fallback_harnesses == ["codex"]
    assert settings.provider_wait_seconds == 300
    with_models = settings.model_copy(update={"harness_models": {"codex": "gpt-5.5"}})
    assert with_models.model_for("codex") == "gpt-5.5"


def test_harness_on_the_command_line_leaves_the_configured_model_behind(home: Path) -> None:
    """``run --harness codex`` on a claude configuration: codex's Model is its harness_models
    entry (or its default), never the claude Model; ``--model`` still wins."""
    (home / "config.toml").write_text(
        'model = "claude-sonnet-4-5"\n[harness_models]\ncodex = "gpt-5.5"\n'
    )
    settings = load_settings(os.environ)
    switched = with_harness(settings, "codex", None)
    assert switched.harness == "codex"
    assert switched.model_for("codex") == "gpt-5.5"
    assert with_harness(settings, "codex", "o-model").model_for("codex") == "o-model"
    assert with_harness(settings, "claude", None).model_for("claude") == "claude-sonnet-4-5"
    bare = load_settings({**os.environ, "THIRDSHIFT_HARNESS_MODELS": "{}"})
    assert with_harness(bare, "codex", None).model_for("codex") is None


def test_an_unknown_harness_in_the_fallbacks_is_refused(home: Path) -> None:
    """harness_fallbacks names only known Harnesses."""
    (home / "config.toml").write_text('harness_fallbacks = ["gemini"]\n')
    with pytest.raises(ConfigError, match="harness_fallbacks"):
        load_settings(os.environ)


def test_a_table_setting_given_as_plain_text_is_shown_as_a_json_object(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THIRDSHIFT_MODEL_PRICES", "gpt-x=1")
    with pytest.raises(ConfigError, match="not valid JSON; an object is written as JSON"):
        load_settings(os.environ)


def test_a_budget_must_be_a_finite_amount(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THIRDSHIFT_COST_BUDGET_PER_REPOSITORY_DAY_USD", "inf")
    with pytest.raises(ConfigError, match="finite number"):
        load_settings(os.environ)


def test_harness_on_the_command_line_leaves_the_configured_harness_args_behind(
    home: Path,
) -> None:
    """harness_args are the configured CLI's options: claude's would break codex (and codex's
    -c means --continue to claude); the other Harness gets its harness_options entry only."""
    (home / "config.toml").write_text('harness_args = ["--max-turns", "40"]\n')
    settings = load_settings(os.environ)
    assert with_harness(settings, "codex", None).harness_args == []
    assert with_harness(settings, "claude", None).harness_args == ["--max-turns", "40"]


def test_provider_waits_and_pauses_are_bounded(home: Path) -> None:
    (home / "config.toml").write_text("provider_wait_seconds = 86400\n")
    with pytest.raises(ConfigError, match="provider_wait_seconds"):
        load_settings(os.environ)
    (home / "config.toml").write_text("provider_pause_seconds = 1e300\n")
    with pytest.raises(ConfigError, match="provider_pause_seconds"):
        load_settings(os.environ)


def test_an_architect_schedule_is_read_per_repository_and_a_bad_one_names_key_and_shape(
    home: Path,
) -> None:
    (home / "config.toml").write_text('[architect_schedule]\n"octo/widgets" = "0 3 * * 1"\n')
    settings = load_settings(os.environ)
    assert settings.architect_schedule == {"octo/widgets": "0 3 * * 1"}
    assert not settings.architect_hand_over
    assert settings.architect_plans_per_week == 1
    (home / "config.toml").write_text('[architect_schedule]\n"octo/widgets" = "every monday"\n')
    with pytest.raises(ConfigError) as refused:
        load_settings(os.environ)
    assert "architect_schedule" in str(refused.value)
    assert "cron expression of five fields" in str(refused.value)
    (home / "config.toml").write_text('[architect_schedule]\n"no-slash" = "0 3 * * 1"\n')
    with pytest.raises(ConfigError, match="is not OWNER/NAME"):
        load_settings(os.environ)


def test_public_url_is_an_http_address_kept_without_its_trailing_slash(home: Path) -> None:
    """The Run pages are ``<public_url>/runs/<id>``: a query, a fragment, credentials or
    another scheme are refused, naming the setting and the form it takes; unset, none."""
    assert load_settings(os.environ).public_url is None
    (home / "config.toml").write_text('public_url = "https://thirdshift.example.org/status/"\n')
    assert load_settings(os.environ).public_url == "https://thirdshift.example.org/status"
    for wrong in ("ftp://x.example", "x.example", "https://x.example/?a=1", "https://x.example/#r",
                  "https://me:pw@x.example"):  # fmt: skip
        (home / "config.toml").write_text(f'public_url = "{wrong}"\n')
        with pytest.raises(ConfigError) as caught:
            load_settings(os.environ)
        assert "key 'public_url'" in str(caught.value), wrong
        assert "e.g. https://thirdshift.example.org" in str(caught.value), wrong
