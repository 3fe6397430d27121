"""The store: every row thirdshift keeps, in SQLite (WAL) or PostgreSQL.

``Store`` is the one class that issues SQL; it hands out the frozen records of
``thirdshift.records``, never table rows. ``tables`` holds the SQLModel tables and ``migrations``
the Alembic history that ``Store.open`` applies. An adapter: the Run's rules never import it.
"""

from thirdshift.store.repository import Store, redact_url, utcnow

__all__ = ["Store", "redact_url", "utcnow"]
