"""The store: every row thirdshift keeps, in SQLite (WAL) or PostgreSQL.

``Store`` is the one class that issues SQL; it hands out the frozen records of
``thirdshift.records``, never table rows. It is composed of one part per thing it keeps
(``repositories``, ``runs``, ``sessions``, ``ledger``, ``leases``, ``activity``, ``feedback``,
``architect``, ``spec``; ``figures`` adds up what ``thirdshift report`` reads), each built on
``base``; ``engine`` opens a database and migrates it.
``tables`` holds the SQLModel tables and ``migrations`` the Alembic history that ``Store.open``
applies. An adapter: the Run's rules never import it.
"""

from thirdshift.store.base import redact_url, utcnow
from thirdshift.store.repository import Store

__all__ = ["Store", "redact_url", "utcnow"]
