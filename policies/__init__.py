"""Shipped ONNX policies (``reach.onnx``), the scripts that trained and exported them, and the
evaluation through the ONNX controller (``python -m policies.evaluate``). Cards: ``*.md``."""
