"""Example hardware configuration of the serial backend (``serial_robot.toml``) and its README."""
