"""What the agent sandbox hides besides thirdshift's home: the user's home and each Harness's
own directories wherever the environment puts them."""

from __future__ import annotations

from pathlib import Path

from thirdshift.bootstrap import hidden_from_agents
from thirdshift.settings import Settings


def test_opencode_s_xdg_directories_outside_home_are_hidden(tmp_path: Path) -> None:
    """Its sessions database (XDG_DATA_HOME/opencode), configuration and state are hidden even
    when the XDG variables point outside HOME."""
    environ = {
        "HOME": str(tmp_path / "home"),
        "XDG_DATA_HOME": "/srv/data",
        "XDG_CONFIG_HOME": "/srv/config",
        "XDG_STATE_HOME": "/srv/state",
        "CODEX_HOME": "/srv/codex",
    }
    hidden = hidden_from_agents(Settings(home=tmp_path / "ts"), environ)
    assert Path("/srv/data/opencode") in hidden
    assert Path("/srv/config/opencode") in hidden
    assert Path("/srv/state/opencode") in hidden
    assert Path("/srv/codex") in hidden
    assert tmp_path / "home" in hidden


def test_without_xdg_variables_only_home_covers_opencode(tmp_path: Path) -> None:
    """The XDG defaults lie inside HOME, which is hidden whole."""
    hidden = hidden_from_agents(Settings(home=tmp_path / "ts"), {"HOME": str(tmp_path / "h")})
    assert tmp_path / "h" in hidden
    assert not any(path.name == "opencode" for path in hidden)
