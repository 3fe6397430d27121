"""What operators read: the views of the store behind ``thirdshift runs``, ``show`` and
``logs``.

``shapes`` turns the store's records into the one JSON shape of each entity; ``views`` writes
the lines people read; both are pure. ``logs`` reads a Session log back through its Harness's
stream reader and follows one that is still growing.
"""
