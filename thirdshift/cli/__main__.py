"""``python -m thirdshift.cli``: the ``thirdshift`` command, as the tests and scripts start it."""

from thirdshift.cli import main

main()
