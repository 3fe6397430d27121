"""What operators read: the views of the store behind ``thirdshift runs``, ``show``, ``logs``
and ``report``.

``shapes`` turns the store's records into the one JSON shape of each entity; ``views`` writes
the lines people read; both are pure. ``period`` puts ``thirdshift report``'s figures together
and ``tables`` writes them, pure too. ``logs`` reads a Session log back through its Harness's
stream reader and follows one that is still growing.
"""
