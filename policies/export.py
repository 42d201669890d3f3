"""Export a trained actor MLP to ONNX with the exploy metadata (``docs/formats/onnx-policy.md``).

The graph takes only exploy inputs and computes everything else itself, so the ONNX controller
(``twin.control.OnnxRLController``) runs it on either backend with no Python glue:

    inputs   obj.arm.joints.pos (1, 6) rad, obj.arm.joints.vel (1, 6) rad/s,
             obj.arm.tcp.pos_b_rt_w_in_w (1, 3) m (world), obj.arm.tcp.w_Q_b (1, 4) [w, x, y, z],
             cmd.se3_pose.target (1, 7) [px, py, pz, qw, qx, qy, qz] (world)
    graph    obs = twin.env.features.reach_observation(...)        (the same maths, in ONNX ops)
             a = tanh(MLP(obs));  pos = clip(q + ACTION_SCALE_RAD * a, lower, upper)
    outputs  output.joint_targets.arm.pos (1, 6) rad (absolute joint targets),
             actions (1, 6) and obs (1, 32) (informational; not matched by the controller)

Metadata: ``exploy_version``, ``update_rate`` (the 25 Hz policy rate, no in-graph decimation),
``base_names`` ``{"arm": "base_link"}``, the joint group's ``joint_names``, the target group's
``names``/``stiffness``/``damping`` (``twin.env.tasks.DEFAULT_GAINS``), and informational keys.
"""

from __future__ import annotations

import datetime
import pathlib
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from twin.control.export import IR_VERSION, OPSET, joint_targets_metadata, model_metadata
from twin.env import features
from twin.env.core import ACTION_SCALE_RAD, POLICY_RATE_HZ
from twin.env.tasks import DEFAULT_GAINS, PdGains

ARTICULATION = "arm"
BASE_BODY = "base_link"
TCP_BODY = "tcp"
TARGET_COMMAND = "target"
JOINT_GROUP = f"obj.{ARTICULATION}.joints"
TARGET_GROUP = f"output.joint_targets.{ARTICULATION}"
IN_Q = f"{JOINT_GROUP}.pos"
IN_QD = f"{JOINT_GROUP}.vel"
IN_TCP_POS = f"obj.{ARTICULATION}.{TCP_BODY}.pos_b_rt_w_in_w"
IN_TCP_QUAT = f"obj.{ARTICULATION}.{TCP_BODY}.w_Q_b"
IN_TARGET = f"cmd.se3_pose.{TARGET_COMMAND}"
OUT_POS = f"{TARGET_GROUP}.pos"

#: A dense layer as numpy arrays: weight (out, in), bias (out,).
Layer = tuple[np.ndarray, np.ndarray]


def _hamilton_tensor() -> np.ndarray:
    """C (16, 4) with ``(a (x) b)_k = sum_ij C[4 i + j, k] a_i b_j`` (Hamilton product)."""
    c = np.zeros((4, 4, 4), dtype=np.float32)
    e = np.eye(4)
    for i in range(4):
        for j in range(4):
            c[i, j] = features._hamilton(e[i], e[j])
    return c.reshape(16, 4)


def _cross_tensor() -> np.ndarray:
    """C (9, 3) with ``(a x b)_k = sum_ij C[3 i + j, k] a_i b_j``."""
    c = np.zeros((3, 3, 3), dtype=np.float32)
    e = np.eye(3)
    for i in range(3):
        for j in range(3):
            c[i, j] = np.cross(e[i], e[j])
    return c.reshape(9, 3)


class _Graph:
    """A tiny builder: named constants and nodes with generated output names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def const(self, value, name: str | None = None, dtype=np.float32) -> str:
        self._n += 1
        name = name or f"c{self._n}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, kind: str, *inputs: str, out: str | None = None, **attrs) -> str:
        self._n += 1
        out = out or f"{kind.lower()}{self._n}"
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def slice(self, x: str, start: int, end: int) -> str:
        """Columns ``start:end`` of x (N, n) (Slice inputs: data, starts, ends, axes)."""
        return self.op(
            "Slice",
            x,
            self.const([start], dtype=np.int64),
            self.const([end], dtype=np.int64),
            self.const([1], dtype=np.int64),
        )

    def bilinear(self, a: str, b: str, tensor: np.ndarray, n_a: int, n_b: int) -> str:
        """``sum_ij T[i n_b + j, k] a_i b_j`` for batches a (N, n_a), b (N, n_b)."""
        outer = self.op(
            "Mul",
            self.op("Unsqueeze", a, self.const([2], dtype=np.int64)),
            self.op("Unsqueeze", b, self.const([1], dtype=np.int64)),
        )
        flat = self.op("Reshape", outer, self.const([-1, n_a * n_b], dtype=np.int64))
        return self.op("MatMul", flat, self.const(tensor))

    def cross(self, a: str, b: str) -> str:
        """Cross products of batches a, b (N, 3)."""
        return self.bilinear(a, b, _cross_tensor(), 3, 3)

    def rotate(self, quat: str, v: str) -> str:
        """Rotate v (N, 3) by unit quat (N, 4): ``v + w t + u x t``, ``t = 2 u x v``."""
        w = self.slice(quat, 0, 1)
        u = self.slice(quat, 1, 4)
        t = self.op("Mul", self.cross(u, v), self.const([2.0]))
        return self.op("Add", self.op("Add", v, self.op("Mul", w, t)), self.cross(u, t))

    def dot(self, a: str, b: str) -> str:
        """Row-wise dot products (N, 1) of a, b (N, 3)."""
        axes = self.const([1], dtype=np.int64)
        return self.op("ReduceSum", self.op("Mul", a, b), axes, keepdims=1)

    def sign_fixed(self, quat: str) -> str:
        """quat (N, 4) times +1 where w >= 0, else -1 (``features.sign_nonnegative``)."""
        w = self.slice(quat, 0, 1)
        ge = self.op("GreaterOrEqual", w, self.const([0.0]))
        sign = self.op("Where", ge, self.const([1.0]), self.const([-1.0]))
        return self.op("Mul", quat, sign)


def _reach_features(g: _Graph, arm=None, gains_kp: np.ndarray | None = None) -> str:
    """ONNX nodes computing ``features.reach_observation``; returns the obs name (N, 32).

    With ``arm`` (an ``ArmModel``), also ``jt_error`` (the Jacobian of ``arm``), (N, 38).
    """
    tcp_quat = g.sign_fixed(IN_TCP_QUAT)
    target_pos = g.slice(IN_TARGET, 0, 3)
    target_quat = g.sign_fixed(g.slice(IN_TARGET, 3, 7))
    qc = g.op("Mul", tcp_quat, g.const([1.0, -1.0, -1.0, -1.0]))
    pos_err = g.rotate(qc, g.op("Sub", target_pos, IN_TCP_POS))
    # rot_error = 2 sign(w) vec(qc (x) target_quat)
    rel = g.bilinear(qc, target_quat, _hamilton_tensor(), 4, 4)
    rot_err = g.op("Mul", g.slice(g.sign_fixed(rel), 1, 4), g.const([2.0]))
    terms = [IN_Q, IN_QD, IN_TCP_POS, tcp_quat, target_pos, target_quat, pos_err, rot_err]
    layout = features.REACH_TERMS
    if arm is not None:
        e_p = g.rotate(tcp_quat, pos_err)
        terms.extend(_model_terms(g, arm, e_p, g.rotate(tcp_quat, rot_err), gains_kp))
    layout = features.reach_layout(arm is not None)
    raw = g.op("Concat", *terms, axis=1)
    return g.op("Mul", raw, g.const(features.scales(layout)), out="obs")


def _model_terms(g: _Graph, arm, e_p: str, e_r: str, kp: np.ndarray) -> tuple[str, str]:
    """``features.ik_step`` and ``features.gravity_offset`` in ONNX ops: (N, 6) rad each.

    FK of the base-to-TCP chain from ``IN_Q`` (the constant per-joint matrices of
    ``twin.kinematics.fk.KinematicTree``: ``origin @ Rot(axis, q) = A0 + cos q Ac + sin q As``).
    Jacobian column i is ``[z_i x (p_tcp - o_i); z_i]`` with ``p_tcp`` the TCP input; the
    inverse of the IK step is the same Newton-Schulz iteration as in ``features.ik_step``.
    The gravity offset sums the links' first moments beyond each joint, as in
    ``features.gravity_offset`` (``kp`` the exported stiffness).
    """
    rot, trans = g.const(np.eye(3)[None]), g.const(np.zeros((1, 3, 1)))
    shape = g.const([-1, 3], dtype=np.int64)
    axis2 = g.const([2], dtype=np.int64)
    joints: dict[int, tuple[str, str]] = {}  # q index -> (z (N, 3), o (N, 3)), base frame
    # chain order, per edge: its joint (if revolute), then its link's first moment (m c, m)
    items: list[tuple[str, object, object]] = []
    for edge, mass, com in features.tcp_chain(arm):
        if edge.q_index < 0:
            local = g.const(edge.origin_r)
        else:
            qk = g.op("Unsqueeze", g.slice(IN_Q, edge.q_index, edge.q_index + 1), axis2)
            local = g.op(
                "Add",
                g.op("Add", g.const(edge.a0), g.op("Mul", g.op("Cos", qk), g.const(edge.ac))),
                g.op("Mul", g.op("Sin", qk), g.const(edge.as_)),
            )
        trans = g.op("Add", trans, g.op("MatMul", rot, g.const(edge.origin_p.reshape(3, 1))))
        rot = g.op("MatMul", rot, local)
        origin = g.op("Reshape", trans, shape)
        if edge.q_index >= 0:
            z = g.op("Reshape", g.op("MatMul", rot, g.const(edge.axis.reshape(3, 1))), shape)
            joints[edge.q_index] = (z, origin)
            items.append(("joint", edge.q_index, None))
        if mass > 0.0:
            com_w = g.op("Reshape", g.op("MatMul", rot, g.const(com.reshape(3, 1))), shape)
            items.append(("link", g.op("Mul", g.op("Add", origin, com_w), g.const([mass])), mass))
    ik_step = _dls_step(g, arm, joints, e_p, e_r)
    tau: dict[int, str] = {}
    moment, total = None, 0.0
    for kind, a, b in reversed(items):
        if kind == "link":
            moment = a if moment is None else g.op("Add", moment, a)
            total += b
        else:
            z, o = joints[a]
            lever = g.op("Sub", moment, g.op("Mul", o, g.const([total])))
            tau[a] = g.slice(g.cross(z, lever), 2, 3)
    torques = g.op("Concat", *(tau[k] for k in range(arm.n_joints)), axis=1)
    scale = features.GRAVITY_M_S2 / np.asarray(kp, float)
    return ik_step, g.op("Mul", torques, g.const(scale))


def _dls_step(g: _Graph, arm, joints: dict[int, tuple[str, str]], e_p: str, e_r: str) -> str:
    """The damped-least-squares step ``features.ik_step`` from the joint axes and origins."""
    axis2 = g.const([2], dtype=np.int64)
    columns = []
    for k in range(arm.n_joints):
        z, o = joints[k]
        lever = g.cross(z, g.op("Sub", IN_TCP_POS, o))
        columns.append(g.op("Unsqueeze", g.op("Concat", lever, z, axis=1), axis2))
    jac = g.op("Concat", *columns, axis=2)  # (N, 6, 6) [v; w]
    w = features.ik_weights()
    jw = g.op("Mul", jac, g.const(w.reshape(1, 6, 1)))
    jw_t = g.op("Transpose", jw, perm=[0, 2, 1])
    eye = np.eye(6)
    a = g.op("Add", g.op("MatMul", jw, jw_t), g.const(features.IK_DAMPING * eye))
    trace = g.op("ReduceSum", g.op("Mul", a, g.const(eye)), g.const([1, 2], dtype=np.int64))
    x = g.op("Div", g.const(eye), trace)
    two_eye = g.const(2.0 * eye)
    for _ in range(features.IK_NEWTON_SCHULZ_ITERATIONS):
        x = g.op("MatMul", x, g.op("Sub", two_eye, g.op("MatMul", a, x)))
    ew = g.op("Unsqueeze", g.op("Mul", g.op("Concat", e_p, e_r, axis=1), g.const(w)), axis2)
    step = g.op("MatMul", jw_t, g.op("MatMul", x, ew))
    step = g.op("Reshape", step, g.const([-1, 6], dtype=np.int64))
    clip = features.IK_STEP_CLIP_RAD
    return g.op("Clip", step, g.const(-clip), g.const(clip))


def _mlp(g: _Graph, x: str, layers: Sequence[Layer]) -> str:
    """ReLU MLP: ``x W^T + b`` per layer, ReLU between layers, none after the last."""
    for k, (weight, bias) in enumerate(layers):
        x = g.op("Gemm", x, g.const(weight), g.const(bias), transB=1)
        if k < len(layers) - 1:
            x = g.op("Relu", x)
    return x


def build_reach_model(
    layers: Sequence[Layer],
    joint_names: Sequence[str],
    lower: np.ndarray,
    upper: np.ndarray,
    gains: PdGains = DEFAULT_GAINS,
    model_source: str = "",
    model_arm=None,
) -> onnx.ModelProto:
    """The Reach policy graph with its exploy metadata (see the module docstring).

    ``model_arm``: the ``ArmModel`` whose FK, Jacobian and masses the model-based terms use
    (``ReachEnv(model_features=True)``, 44 terms); ``None`` for the 32-term observation.
    """
    n = len(joint_names)
    g = _Graph()
    obs = _reach_features(g, model_arm, gains.kp)
    actions = g.op("Tanh", _mlp(g, obs, layers), out="actions")
    pos = g.op("Add", IN_Q, g.op("Mul", actions, g.const([ACTION_SCALE_RAD])))
    pos = g.op("Max", g.op("Min", pos, g.const(upper)), g.const(lower), out=OUT_POS)
    del pos

    def tensor(name: str, size: int) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, size])

    inputs = [tensor(IN_Q, n), tensor(IN_QD, n), tensor(IN_TCP_POS, 3), tensor(IN_TCP_QUAT, 4)]
    inputs.append(tensor(IN_TARGET, 7))
    layout = features.reach_layout(model_arm is not None)
    n_obs = sum(size for _, size, _ in layout)
    outputs = [tensor(OUT_POS, n), tensor("actions", n), tensor("obs", n_obs)]
    graph = helper.make_graph(g.nodes, "twin_reach_policy", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    meta = model_metadata(
        POLICY_RATE_HZ,
        metadata={
            JOINT_GROUP: {"joint_names": list(joint_names)},
            TARGET_GROUP: joint_targets_metadata(joint_names, gains.kp, gains.kd),
            "obs_term_names": [name for name, _, _ in layout],
            "decimation": 1,
            "action_scale_rad": ACTION_SCALE_RAD,
        },
        base_names={ARTICULATION: BASE_BODY},
        model_source=model_source or "twin policies/train_reach.py",
        date_exported=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )
    helper.set_model_props(model, meta)
    onnx.checker.check_model(model)
    return model


def export_reach_policy(
    layers: Sequence[Layer], out: pathlib.Path | str, model_source: str = ""
) -> pathlib.Path:
    """Write the Reach policy for the shipped arm to ``out``; returns the path."""
    from twin.kinematics import ArmModel

    arm = ArmModel.default()
    n_obs = layers[0][0].shape[1]
    sizes = (features.REACH_OBS_SIZE, features.REACH_MODEL_OBS_SIZE)
    if n_obs not in sizes:
        raise ValueError(f"the MLP takes {n_obs} inputs; expected one of {sizes}")
    model = build_reach_model(
        layers,
        arm.joint_names,
        arm.lower,
        arm.upper,
        model_source=model_source,
        model_arm=arm if n_obs == features.REACH_MODEL_OBS_SIZE else None,
    )
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, out)
    return out


def mlp_from_sb3_sac(model) -> list[Layer]:
    """The deterministic actor of a stable-baselines3 SAC model as numpy layers.

    ``latent_pi`` (Linear/ReLU stack) then ``mu``; the action is ``tanh`` of the output.
    """
    import torch

    linears = [m for m in model.actor.latent_pi if isinstance(m, torch.nn.Linear)]
    linears.append(model.actor.mu)
    return [
        (
            m.weight.detach().cpu().numpy().astype(np.float32),
            m.bias.detach().cpu().numpy().astype(np.float32),
        )
        for m in linears
    ]


def mlp_from_onnx(path: pathlib.Path | str) -> list[Layer]:
    """The actor MLP of an exported policy (the ``Gemm`` chain ``_mlp`` wrote from ``obs``), as
    numpy layers: the inverse of the export, to continue training a shipped policy."""
    model = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    gemms = {n.input[0]: n for n in model.graph.node if n.op_type == "Gemm"}
    layers, x = [], "obs"
    while x in gemms:
        node = gemms[x]
        layers.append((inits[node.input[1]], inits[node.input[2]]))
        after = [n for n in model.graph.node if n.input and n.input[0] == node.output[0]]
        relu = next((n for n in after if n.op_type == "Relu"), None)
        if relu is None:
            break
        x = relu.output[0]
    if not layers:
        raise ValueError(f"{path} has no MLP fed by 'obs' (not a policy of policies/export.py)")
    return layers


def load_mlp_into_sb3_sac(model, layers: Sequence[Layer], log_std: float = -1.5) -> None:
    """Set a stable-baselines3 SAC actor's ``latent_pi`` and ``mu`` to ``layers`` (the shapes
    must match its ``net_arch``); the ``log_std`` head outputs ``log_std`` everywhere."""
    import torch

    linears = [m for m in model.actor.latent_pi if isinstance(m, torch.nn.Linear)]
    linears.append(model.actor.mu)
    if [tuple(m.weight.shape) for m in linears] != [tuple(w.shape) for w, _ in layers]:
        raise ValueError(
            f"layer shapes {[tuple(w.shape) for w, _ in layers]} do not match the actor's "
            f"{[tuple(m.weight.shape) for m in linears]}"
        )
    with torch.no_grad():
        for m, (w, b) in zip(linears, layers):
            m.weight.copy_(torch.as_tensor(w))
            m.bias.copy_(torch.as_tensor(b))
        model.actor.log_std.weight.zero_()
        model.actor.log_std.bias.fill_(log_std)
