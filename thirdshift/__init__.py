"""thirdshift: turns GitHub issues into pull requests it stands behind."""

__version__ = "0.1.0.dev0"
