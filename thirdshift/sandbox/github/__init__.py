"""The GitHub stand-in: ``server.GitHubStandIn`` serves REST and GraphQL from the state model in
``state``, in the JSON shapes of ``shapes``, with one module per family of endpoints."""

from thirdshift.sandbox.github.server import GitHubStandIn

__all__ = ["GitHubStandIn"]
