"""Stages 4–5: calibrate noise and emit the mechanism and certificate."""
