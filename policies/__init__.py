"""Shipped ONNX policies (``reach.onnx``), the scripts that trained and exported them, and the
evaluation through the ONNX controller (``python -m twin.policies.evaluate``). Cards: ``*.md``."""
