"""`sglang.benchmark` of the twin (0.5.10 and later have this package; `install.py` leaves it
out for 0.5.9, and leaves out `serving` for releases before 0.5.15)."""
