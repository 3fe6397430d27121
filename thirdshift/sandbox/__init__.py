"""The test worlds: stand-ins for the two services no machine here can reach.

``github`` is the GitHub stand-in (REST, the little GraphQL, git over smart HTTP from
``git_http``, simulated CI from ``ci``), ``model`` the scripted model server, ``client`` the
Python client of the stand-in's ``/_sandbox/`` controls, and ``demo`` a whole Run on one machine.
The product never imports this package; only the CLI's ``sandbox`` and ``demo`` commands do.
"""
