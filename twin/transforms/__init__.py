"""Frame transformers: ``WrenchTf``, ``TwistTf``, ``ImuTf``, ``PoseTf`` (after the vendor's
frame-transformer SDK, ``docs/reference/transformers.md``; config format and codes as in
``docs/formats/transformer-config.md``).

One interface::

    tf = WrenchTf("assets/config/tf_example.json")   # section tf_wrench_config; or WrenchTf(TfConfig(...))
    tf.set_output_reference_point("fixed_frame", [0.1, 0.0, 0.0])  # False + warning if from config
    out = np.zeros(6)
    while running:
        tf.set_fixed_to_moving_frame_tf([tx, ty, tz, qw, qx, qy, qz])  # if an entry is on the moving frame
        code, out = tf.update(wrench_in, out)                           # allocation-free with out
    codes, outs = tf.update_batch(wrenches, moving_tfs)                 # (N, 6) and (N, 7) logs

Entries: ``Translation(origin, [x, y, z])`` (m, from the origin frame, in its axes) and
``Rotation(origin, [qw, qx, qy, qz])`` (the axes relative to the origin frame), ``origin`` one of
``fixed_frame``, ``moving_frame`` or empty ("not set": its setter must be called before update).
Physics: see ``twin.transforms.signals`` (wrench moment term, twist velocity term, IMU centripetal
term ``w x (w x (p_out - p_in))`` without angular acceleration) and ``twin.transforms.pose``.

Policies and return codes
-------------------------
Conditions checked on every ``update`` (``update_batch`` checks them per row, except staleness):

- not set: an entry still has an empty origin;
- tf missing: an entry uses ``moving_frame`` but ``set_fixed_to_moving_frame_tf`` was never called;
- non-finite: a NaN/inf in the input, or in the pushed transform (or a zero quaternion);
- stale: ``max_tf_age_s`` is configured and the pushed transform is older than it at update time
  (stamps from ``t_us`` arguments, else the monotonic clock);
- off norm: the moving-frame (or, for ``PoseTf``, input) quaternion's norm is off 1 by more than
  1e-6; it is normalised.

What each policy returns ("zeros" = the output is all zeros; "computed" = the transform of the
input with the data at hand: the last pushed transform, the normalised quaternion):

==========  =====================  =====================  =====================  =================
condition   best_effort (default)  soft_rt                hard_rt                strict_rt
==========  =====================  =====================  =====================  =================
none        OK, computed           OK, computed           OK, computed           OK, computed
off norm    Degraded, computed     Degraded, computed     Degraded, computed     FatalError, zeros
stale       Stale, computed        DeadlineMissed, comp.  DeadlineMissed, zeros  FatalError, zeros
non-finite  NonFatalError, zeros   NonFatalError, zeros   FatalError, zeros      FatalError, zeros
tf missing  NonFatalError, zeros   NonFatalError, zeros   FatalError, zeros      FatalError, zeros
not set     NonFatalError, zeros   NonFatalError, zeros   FatalError, zeros      FatalError, zeros
==========  =====================  =====================  =====================  =================

When several conditions hold, a zeros outcome wins, else the most severe code (codes are ordered
OK < Stale < Degraded < DeadlineMissed < NonFatalError < FatalError). ``tf.reason`` says why the
last update was not OK; a change of code is logged once on the ``twin.transforms`` logger (no
formatting or logging while the code stays the same). The table itself is data:
``twin.transforms.codes.POLICY_TABLE``. Where it differs from the reference SDK: the SDK passes
NaN through with OK and uses a non-unit moving-frame or input quaternion raw (a non-rigid
result, still OK); here those are non-finite and off-norm conditions. The not-set and tf-missing
rows are the SDK's (NonFatalError under best_effort and soft_rt, FatalError under hard_rt and
strict_rt).

Speed: with numba installed (the ``fast`` or ``test`` extra) ``update``,
``set_fixed_to_moving_frame_tf`` and ``update_batch`` run compiled kernels (``_compiled``) over
the same plain-arithmetic maths the Python paths run (``kernels``): a control loop that passes
float64 arrays and the same ``out`` array every cycle takes them past all checks but the
kernel's own while the code stays OK; anything else goes through the checked path.
``TWIN_TRANSFORMS_COMPILED=0`` turns them off.

Configuration errors (bad JSON, missing section, unknown origin, wrong length or type,
non-finite number, quaternion norm off 1 by more than 1e-3, moving input axes on ``PoseTf``)
raise ``TfConfigError`` naming the file, section and field. A quaternion off unit norm by more
than 1e-6 and at most 1e-3 (a hand-written ``[0.7071, 0, 0, 0.7071]``) is normalised with a
``TfConfigWarning`` naming the same. An unknown policy or key warns (``TfConfigWarning``) and is
ignored (policy: best effort).
"""

from twin.transforms.codes import POLICY_TABLE, Condition, Policy, ReturnCode
from twin.transforms.config import (
    Origin,
    Rotation,
    TfConfig,
    TfConfigError,
    TfConfigWarning,
    Translation,
    load_tf_config,
)
from twin.transforms.pose import PoseTf
from twin.transforms.signals import ImuTf, TwistTf, WrenchTf

__all__ = [
    "POLICY_TABLE",
    "Condition",
    "ImuTf",
    "Origin",
    "Policy",
    "PoseTf",
    "ReturnCode",
    "Rotation",
    "TfConfig",
    "TfConfigError",
    "TfConfigWarning",
    "Translation",
    "TwistTf",
    "WrenchTf",
    "load_tf_config",
]
