"""Test-only helpers shared by the suites (never imported by the package)."""
