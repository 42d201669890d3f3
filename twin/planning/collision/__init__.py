"""The planner's collision model: conservative sphere covers of the robot and its attachments
(``spheres``, ``robot_model``), the generated self-collision matrix (``self_collision``), the
obstacles' distance field (``field``, from meshes, point clouds and scene files via ``geometry``
and ``scene_obstacles``), the batched sphere kernel (``kernel``) and the checker that certifies
configurations and segments (``checker``)."""
