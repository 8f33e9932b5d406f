"""Storage engines: one narrow interface (``base.Engine``), one implementation per database."""
