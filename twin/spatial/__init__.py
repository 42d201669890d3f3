"""Spatial core: rotations, rigid transforms and the frame graph (quaternions ``[w, x, y, z]``)."""

from twin.spatial import batch, quaternion
from twin.spatial.frame_graph import FrameGraph, LookupFailure, LookupResult
from twin.spatial.so3 import SE3, SO3

__all__ = ["SE3", "SO3", "FrameGraph", "LookupFailure", "LookupResult", "batch", "quaternion"]
