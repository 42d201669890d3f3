"""The generated dynamics compiled to machine code with numba (optional: ``pip install numba``).

``codegen`` writes inverse dynamics and the mass matrix as straight-line arithmetic; here the
same lines, with the kinematic constants folded in but the body inertial parameters left as an
input (``codegen.symbolic_inertials``: one compiled code serves every payload of an arm), become
a Python module of ``@njit(cache=True)`` kernels:

* ``tau_one(q, qd, qdd, par, out)`` / ``mass_one(q, par, out)``: one state, (n,) inputs,
  ``out`` (n,) N m or (n, n) kg m^2; they return False (``out`` untouched) unless every input is
  n finite numbers;
* ``tau_many(q, qd, qdd, par, out)`` / ``mass_many(q, par, out)``: N states as (N, n)
  C-contiguous inputs, ``out`` (N, n) or (N, n * n); they return whether every input was
  finite (``out`` is filled either way: a non-finite input spoils its own state). The states go in blocks of ``BLOCK``,
  transposed inside the kernel to one row per joint (so that the loop over a block's states
  vectorizes, four states to a 256-bit register: with the states' rows as they come it does
  not, 4-6x slower) and back on the way out, without copies of the whole batch; sin and cos by
  polynomials (``_SIN``), with float roundings only (``np.floor``: ``math.floor`` gives an
  integer, whose conversion has no vector form on AVX2 and cost 15-20 % of the time). They run on the calling thread and release the
  GIL: ``code`` splits large batches over the cores (``threads``).

All kernels are compiled with ``FASTMATH`` (fused multiply-adds only) for the host CPU (numba's
default, ``NUMBA_CPU_NAME`` unset; the disk cache is per CPU).
Each kernel has one signature (``SIGNATURES``), compiled when the module loads.
``g`` is (3,) m/s^2 in the base frame, ``par`` (n, 10) the inertial parameters
(``RigidBodyModel.parameters``). The module file is written once per arm (named by the hash of
its source) to ``$TWIN_CACHE_DIR`` (default ``~/.cache/twin``), so that numba's cache beside it
keeps the machine code: the compile (tens of seconds) is paid once per machine, later processes
load it in well under a second. ``TWIN_DYNAMICS_COMPILED=0`` turns this off (the pure
Python/numpy code of ``codegen`` runs instead), as does numba being absent.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

from twin import numba_cache
from twin.dynamics import codegen
from twin.dynamics.model import RigidBodyModel

_PARAMETERS = 10
_A1, _C1, _C2 = "float64[:]", "float64[::1]", "float64[:, ::1]"
#: Each kernel's one signature (compiled when the module loads; ``DynamicsCode`` calls the
#: compiled entry points directly, past numba's type dispatch): one state's inputs in any
#: strides, batches' inputs C-contiguous (N, n).
SIGNATURES = {
    "tau_one": f"boolean({_A1}, {_A1}, {_A1}, {_C1}, {_C1})",
    "mass_one": f"boolean({_A1}, {_C1}, {_C2})",
    "tau_many": f"boolean({_C2}, {_C2}, {_C2}, {_C1}, {_C2})",
    "mass_many": f"boolean({_C2}, {_C1}, {_C2})",
}
_INDEXED = re.compile(r"\b(qdd|qd|q)\[(\d+)\]")


def enabled() -> bool:
    """Whether compiled kernels are wanted (``TWIN_DYNAMICS_COMPILED`` not "0") and numba is
    importable."""
    return numba_cache.enabled("TWIN_DYNAMICS_COMPILED")


#: numba's floating-point flags for every kernel: contraction of a multiply and an add into one
#: fused multiply-add (one rounding instead of two, so results move by rounding only) and
#: nothing else (no reassociation, no assumption that values are finite: the callers rely on a
#: NaN or infinity coming through).
FASTMATH = "{'contract'}"


def _header(n: int, inputs: str, doc: str) -> list[str]:
    name = inputs.split("(")[0]
    flags = f'"{SIGNATURES[name]}", cache=True, nogil=True, fastmath={FASTMATH}'
    lines = [f"@njit({flags})", f"def {inputs}:", f'    """{doc}"""']
    lines += [
        f"    P{i}_{k} = par[{_PARAMETERS * i + k}]" for i in range(n) for k in range(_PARAMETERS)
    ]
    return lines


def _finite_check(names: tuple[str, ...], n: int) -> list[str]:
    lengths = " or ".join(f"{a}.shape[0] != {n}" for a in names)
    test = " and ".join(f"math.isfinite({a}[i])" for a in names)
    return [
        f"    if {lengths}:",
        "        return False",
        f"    for i in range({n}):",
        f"        if not ({test}):",
        "            return False",
    ]


def _one(lines: list[str], values: list[str], target: str) -> list[str]:
    """One state: the same arithmetic as ``_many`` (sin and cos too), so that a single call
    and a batch agree to rounding (not always to the bit: LLVM may fuse other multiply-adds
    in the one-state code; the mass matrix differs in the last bits for about half the
    states, inverse dynamics not at all, on AVX2)."""
    body = []
    for x in lines:
        trig = _TRIG.match(x)
        body += ["    " + y for y in _sincos(trig[1], f"q[{trig[2]}]")] if trig else [x]
    return body + [f"    out[{target.format(k=k)}] = {v}" for k, v in enumerate(values)]


#: sin and cos on [-pi/4, pi/4] (Cephes' ``sin.c``, within 2 ulp there) after a three-part
#: reduction by pi/2 (fdlibm's constants: exact for |q| < 1e6 rad): no library calls, so that
#: LLVM vectorizes the batched loop over states (libm's sin and cos would take most of its time).
_SIN = (
    1.58962301576546568060e-10,
    -2.50507477628578072866e-8,
    2.75573136213857245213e-6,
    -1.98412698295895385996e-4,
    8.33333333332211858878e-3,
    -1.66666666666666307295e-1,
)
_COS = (
    -1.13585365213876817300e-11,
    2.08757008419747316778e-9,
    -2.75573141792967388112e-7,
    2.48015872888517045348e-5,
    -1.38888888888730564116e-3,
    4.16666666666665929218e-2,
)
_PIO2 = (1.57079632673412561417e00, 6.07710050630396597660e-11, 2.02226624871116645580e-21)
_TRIG = re.compile(r"^    c(\d+) = _cos\(q\[(\d+)\]\); s\d+ = _sin\(q\[\d+\]\)$")


def _horner(z: str, coefficients: tuple[float, ...]) -> str:
    expr = repr(coefficients[0])
    for c in coefficients[1:]:
        expr = f"({expr}) * {z} + {c!r}"
    return expr


def _sincos(i: str, angle: str) -> list[str]:
    """Lines setting ``c{i}``, ``s{i}`` to cos and sin of ``angle`` (``_SIN`` doc)."""
    p1, p2, p3 = (repr(x) for x in _PIO2)
    return [
        f"x = {angle}",
        "j = np.floor(x * 0.6366197723675814 + 0.5)",
        f"r = ((x - j * {p1}) - j * {p2}) - j * {p3}",
        "z = r * r",
        f"sp = r + r * z * ({_horner('z', _SIN)})",
        f"cp = 1.0 - 0.5 * z + z * z * ({_horner('z', _COS)})",
        "m = j - 4.0 * np.floor(j * 0.25)",
        "odd = (m == 1.0) | (m == 3.0)",
        "sv = cp if odd else sp",
        "cv = sp if odd else cp",
        f"s{i} = -sv if m >= 2.0 else sv",
        f"c{i} = -cv if (m == 1.0) | (m == 2.0) else cv",
    ]


#: States per block of the batched kernels (module doc): the block's inputs and outputs, one row
#: per joint or value, allocated once per call, stay in the L1 cache (the mass matrix's 36 rows
#: of 64 states: 18 kB; ``bench_dynamics`` measured 128 states 10 % slower for it, 256 states
#: 70 %, 32 the same as 64).
BLOCK = 64


def _many(lines: list[str], values: list[str], inputs: tuple[str, ...], n: int) -> list[str]:
    """The batched loop: inputs (N, n) C-contiguous, the v-th value of state k to
    ``out[k, v]``, in blocks of ``BLOCK`` states transposed on the way in and out (module
    doc)."""
    b, width = BLOCK, len(values)
    head = [
        "    states = q.shape[0]",
        *(f"    t_{a} = np.empty(({n}, {b}))" for a in inputs),
        f"    t_out = np.empty(({width}, {b}))",
        "    finite = True",
        f"    for block in range((states + {b - 1}) // {b}):",
        f"        block_lo = block * {b}",
        f"        block_n = min({b}, states - block_lo)",
        "        for k in range(block_n):",
        f"            for jj in range({n}):",
        *(f"                t_{a}[jj, k] = x_{a} = {a}[block_lo + k, jj]" for a in inputs),
        f"                if not ({' and '.join(f'math.isfinite(x_{a})' for a in inputs)}):",
        "                    finite = False",
        "        for k in range(block_n):",
    ]
    body = []
    for x in lines:
        trig = _TRIG.match(x)
        if trig:
            body += ["            " + y for y in _sincos(trig[1], f"t_q[{trig[2]}, k]")]
        else:
            body.append("        " + _INDEXED.sub(r"t_\1[\2, k]", x))
    stores = [
        f"            t_out[{k}, k] = " + _INDEXED.sub(r"t_\1[\2, k]", v)
        for k, v in enumerate(values)
    ]
    tail = [
        "        for k in range(block_n):",
        f"            for vv in range({width}):",
        "                out[block_lo + k, vv] = t_out[vv, k]",
    ]
    return head + body + stores + tail + ["    return finite"]


def source(model: RigidBodyModel) -> str:
    """The kernels' module source (module doc)."""
    n = model.n
    par = codegen.symbolic_inertials(n)
    tau_lines, taus = codegen.tau_body(model, par)
    mass_lines, entries = codegen.mass_body(model, par)
    gravity = [f"    g{k} = par[{_PARAMETERS * n + k}]" for k in range(3)]
    cell = "{k} // " + str(n) + ", {k} % " + str(n)
    out = ["# Generated by twin.dynamics.compiled: do not edit.", "import math", ""]
    out += ["import numpy as np", ""]
    out += ["from numba import njit", "", ""]
    out += _header(n, "tau_one(q, qd, qdd, par, out)", "One state (module doc).")
    out += _finite_check(("q", "qd", "qdd"), n) + gravity + _one(tau_lines, taus, "{k}")
    out += ["    return True", "", ""]
    out += _header(n, "mass_one(q, par, out)", "One state (module doc).")
    out += _finite_check(("q",), n) + _one(mass_lines, entries, cell)
    out += ["    return True", "", ""]
    out += _header(n, "tau_many(q, qd, qdd, par, out)", "(N, n) states.")
    out += gravity + _many(tau_lines, taus, ("q", "qd", "qdd"), n) + ["", ""]
    out += _header(n, "mass_many(q, par, out)", "(N, n) states.")
    out += _many(mass_lines, entries, ("q",), n)
    return "\n".join(out) + "\n"


def kernels(model: RigidBodyModel) -> SimpleNamespace:
    """The compiled kernels of ``model``'s arm (module doc: their dispatchers by name, plus
    ``load_s``), shared by every payload; raises ``ImportError`` without numba. The first call of
    each kernel on a machine compiles it (then cached on disk)."""
    return numba_cache.compiled_module(
        "twin_dynamics", None, lambda: source(model), SIGNATURES, key=model.arm
    )


def flop_counts(model: RigidBodyModel) -> dict[str, int]:
    """Floating-point operations (additions, subtractions, multiplications, divisions; sin and
    cos by their polynomials included, comparisons and selects not) per state of the batched
    kernels, counted on their source: ``{"tau": ..., "mass": ...}``."""
    import ast

    tree = ast.parse(source(model))
    arith = (ast.Add, ast.Sub, ast.Mult, ast.Div)
    counts = {}
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name in ("tau_many", "mass_many"):
            loop = next(s for s in fn.body if isinstance(s, ast.For))
            counts[fn.name.split("_")[0]] = sum(
                isinstance(node, ast.BinOp) and isinstance(node.op, arith)
                for node in ast.walk(loop)
            )
    return counts
