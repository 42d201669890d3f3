"""Motions built on a path: linear (Cartesian) segments (``linear``), touch approach and retract
(``touch``), collision-safe blend radii (``blend``) over joint curves (``curve``), time
parameterisation (``timing``) and execution on any ``Robot`` (``execute``)."""
