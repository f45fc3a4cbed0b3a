"""``pentrace stats`` and ``pentrace projections``: analytics from the read models."""
