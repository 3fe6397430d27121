"""Pointing OpenCode at the scripted model server (the other CLIs' variables are in
``server``, which is at its size limit)."""

from __future__ import annotations

import json

from thirdshift.sandbox.model.server import SANDBOX_API_KEY

# A model OpenCode's bundled models table knows (and prices), so it sends the Messages request
# unchanged.
SANDBOX_OPENCODE_MODEL = "anthropic/claude-sonnet-4-5"


def opencode_env(server_url: str) -> dict[str, str]:
    """Variables that send OpenCode's model traffic to ``server_url``: its built-in ``anthropic``
    provider (Anthropic Messages, compiled into the binary, so nothing is installed) with the
    server as its ``baseURL``, given inline so that no configuration file is needed."""
    config = {
        "model": SANDBOX_OPENCODE_MODEL,
        "provider": {
            "anthropic": {"options": {"baseURL": f"{server_url}/v1", "apiKey": SANDBOX_API_KEY}}
        },
    }
    return {"OPENCODE_CONFIG_CONTENT": json.dumps(config)}
