"""The scripted model server: ``server.ScriptedModelServer`` plays a ``script.ModelScript`` over
the Anthropic Messages and OpenAI Responses wire formats of ``wire``."""

from thirdshift.sandbox.model.script import ModelScript
from thirdshift.sandbox.model.server import ScriptedModelServer

__all__ = ["ModelScript", "ScriptedModelServer"]
