"""Calibration on the twin or the real arm: payload identification, TCP (pivot), base frame
(point correspondences) and hand-eye (AX = XB), each returning its estimate with residuals, the
condition of the data and a reason when the data are degenerate."""
