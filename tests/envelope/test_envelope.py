#!/usr/bin/python3
"""The judge against a measured envelope (docs/envelope.md, docs/tolerance-model.md "Envelope"),
on inputs whose answer is known by construction: envelopes written here with numpy exactly as
docs/envelope.md specifies, the law's factors checked against closed forms.

    /usr/bin/python3 tests/envelope/test_envelope.py BINARY WORK_DIR
"""
import json
import math
import os
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE)))
import cli.cli_common as cli_common  # noqa: E402
from checks import check, run_tests  # noqa: E402
from envelope.envelope_files import write_envelope  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
cli_common.setup(BIN, WORK)
ALPHA, GAP = 0.01, 3.0  # docs/tolerance-model.md, "Envelope"
U32 = 2.0 ** -24


def run_json(args):
    """(process, JSON report or None) of a quiet run."""
    return cli_common.run_json(["-q"] + list(args))


write, fresh = cli_common.write_h5, cli_common.fresh


def tensors(rep):
    return {t["path"]: t for t in rep["tensors"]}


def t2_upper(p):
    """Student's t with 2 degrees of freedom: the t with P(T > t) = p (closed form)."""
    q = 1 - 2 * p
    return q * math.sqrt(2 / (1 - q * q))


RNG = np.random.default_rng(7)
A = {"/x": RNG.standard_normal(4096).astype(np.float32),
     "/y": RNG.standard_normal((64, 64)).astype(np.float32)}
SIGMA = 1e-4


def noisy(scale, seed):
    g = np.random.default_rng(seed)
    return {k: (v + scale * g.standard_normal(v.shape)).astype(np.float32) for k, v in A.items()}


MEMBERS = [noisy(SIGMA, 100 + k) for k in range(8)]


def floor_of(name, members):
    """The envelope's floor in numpy: sigma with one rounding at A's precision added."""
    av = A[name].astype(np.float64)
    d2 = [np.mean((m[name].astype(np.float64) - av) ** 2) for m in members]
    rms_a = math.sqrt(np.mean(av * av))
    return math.sqrt(np.mean(d2) + (U32 * rms_a) ** 2)


def setup(name, b, members=MEMBERS, **kw):
    d = fresh(name)
    write(os.path.join(d, "a.h5"), A)
    write(os.path.join(d, "b.h5"), b)
    write_envelope(os.path.join(d, "a.envelope.h5"), A, members, **kw)
    return d


def test_honest_passes():
    d = setup("honest", noisy(SIGMA, 1))
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("honest B within the envelope passes", p.returncode == 0, p.stderr + p.stdout)
    b = noisy(SIGMA, 1)
    for name, t in tensors(rep).items():
        err = math.sqrt(np.mean((b[name].astype(np.float64) - A[name]) ** 2))
        want = err / floor_of(name, MEMBERS)
        check("%s: envelope ratio is RMS(b - a) / floor" % name,
              abs(t["envelope"]["ratio"] - want) <= 1e-9 * want, (t["envelope"], want))
        check("%s: K = 8" % name, t["envelope"]["members"] == 8)


def test_five_sigma_fails():
    d = setup("five", noisy(5 * SIGMA, 2))
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("B five times the envelope's spread fails", p.returncode == 1, p.stderr)
    for name, t in tensors(rep).items():
        crit = [r["criterion"] for r in t["reasons"]]
        check("%s: reason envelope" % name, "envelope" in crit, t["reasons"])
        check("%s: diagnosis beyond, not noise" % name, t["diagnosis"]["kind"] == "beyond",
              t["diagnosis"])


def test_law_closed_form_k2():
    """K = 2: nu = 1, the pass factor is GAP t_2 at alpha_t / 2 and the element factor GAP t_2
    at alpha_t / (2 n), alpha_t = ALPHA / (2 tensors)."""
    d = setup("k2", noisy(SIGMA, 3), members=MEMBERS[:2], tensors=5)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    alpha_t = ALPHA / (2 * 5)
    for name, t in tensors(rep).items():
        n = A[name].size
        env = t["envelope"]
        check("%s: dof 1 with two members" % name, env["dof"] == 1, env)
        want = GAP * t2_upper(alpha_t / 2)
        check("%s: factor = 3 t_2(alpha_t / 2) = %.6g" % (name, want),
              abs(env["factor"] - want) <= 1e-6 * want, env)
        want_e = GAP * t2_upper(alpha_t / (2 * n))
        check("%s: element factor = 3 t_2(alpha_t / 2n) = %.6g" % (name, want_e),
              abs(env["elem_factor"] - want_e) <= 1e-6 * want_e, env)


def test_localized():
    b = noisy(SIGMA, 4)
    b["/y"][10, 3] += 0.5
    b["/y"][40, 7] -= 0.5
    d = setup("local", b)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    t = tensors(rep)["/y"]
    check("two elements far beyond their envelope fail", p.returncode == 1, p.stderr)
    check("reason envelope_elements",
          any(r["criterion"] == "envelope_elements" for r in t["reasons"]), t["reasons"])
    check("diagnosis localized, 2 elements", t["diagnosis"]["kind"] == "localized" and
          t["diagnosis"]["value"] == 2, t["diagnosis"])
    check("the untouched tensor passes", tensors(rep)["/x"]["verdict"] == "pass")


def test_event_members_keep_the_element_floor():
    """Two of eight members meet an event (element 0 of /x moved by 1.0, as a flipped sign is
    moved by AdamW's first step): sigma grows to about 1/sqrt(4 * 4096) while the median member
    stays at SIGMA. The element floor is the median member's (numpy), so a bug of 0.03 on 100
    other elements, under sigma's floor, is 100 elements beyond their bound; B meeting the same
    event at element 0 passes (its own bound r_0 = sqrt(2/8) holds it)."""
    members = [noisy(SIGMA, 600 + k) for k in range(8)]
    for m in members[:2]:
        m["/x"][0] += 1.0
    b = noisy(SIGMA, 10)
    b["/x"][100:200] += 0.03
    d = setup("event", b, members=members)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    t = tensors(rep)["/x"]
    av = A["/x"].astype(np.float64)
    dk = [math.sqrt(np.mean((m["/x"].astype(np.float64) - av) ** 2)) for m in members]
    want = math.sqrt(np.median(dk) ** 2 + (U32 * math.sqrt(np.mean(av * av))) ** 2)
    env = t["envelope"]
    check("median_member is numpy's median of the members' RMS errors",
          abs(env["median_member"] - np.median(dk)) <= 1e-12 * np.median(dk), env)
    check("elem_floor = sqrt(median^2 + (u rms_a)^2)",
          abs(env["elem_floor"] - want) <= 1e-9 * want, (env, want))
    check("sigma is the event's, 30 x the median", env["floor"] > 30 * env["elem_floor"], env)
    check("the bug is under sigma's floor: the RMS test alone passes it",
          not any(r["criterion"] == "envelope" for r in t["reasons"]), t["reasons"])
    check("the bug's 100 elements are beyond their bound",
          t["verdict"] == "drift" and env["beyond"] == 100 and
          t["diagnosis"]["kind"] == "localized", (t["verdict"], env, t.get("diagnosis")))
    b = noisy(SIGMA, 11)
    b["/x"][0] += 1.0
    d = setup("event_honest", b, members=members)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("B meeting the members' event passes", p.returncode == 0,
          tensors(rep)["/x"].get("envelope"))


def test_scale_beyond_the_members():
    """K = 2 members with their scales on A (root scale_test 1): three tests a tensor, so
    alpha_t = ALPHA / (3 T) and both the RMS and the scale factor are 3 t_2(alpha_t / 2) (closed
    form). B = A (1 + 1e-3) plus noise at SIGMA: its RMS error (about 10 SIGMA) and every element
    are within the envelope, but its scale on A is some 600 times the members' (about SIGMA / 64):
    reason envelope_scale, diagnosis scaled (B - c A is within the envelope). The same B passes
    an envelope without the members' scales, and honest B passes either."""
    members = [noisy(SIGMA, 700 + k) for k in range(2)]
    b = noisy(SIGMA, 12)
    b["/x"] = (A["/x"].astype(np.float64) * (1 + 1e-3) + (b["/x"] - A["/x"])).astype(np.float32)
    d = setup("scale", b, members=members, scale_test=True)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    t = tensors(rep)["/x"]
    env = t["envelope"]
    av, bv = A["/x"].astype(np.float64), b["/x"].astype(np.float64)
    ck = [((m["/x"].astype(np.float64) - av) * av).sum() / (av * av).sum() for m in members]
    floor = math.sqrt(np.mean(np.square(ck)) + U32 ** 2)
    ratio = abs(((bv - av) * av).sum() / (av * av).sum()) / floor
    want = GAP * t2_upper(ALPHA / (3 * 2) / 2)
    want_c = math.sqrt(np.mean(np.square(ck)))
    check("member_scale = sqrt(mean c_k^2) (numpy)",
          abs(env["member_scale"] - want_c) <= 1e-9 * env["member_scale"], env)
    check("scale_ratio = |c_B| / sqrt(mean c_k^2 + u^2) (numpy)",
          abs(env["scale_ratio"] - ratio) <= 1e-9 * ratio, (env, ratio))
    check("scale_factor and factor = 3 t_2(alpha_t / 2), alpha_t = 0.01 / 6",
          abs(env["scale_factor"] - want) <= 1e-6 * want and
          abs(env["factor"] - want) <= 1e-6 * want, (env, want))
    crit = [r["criterion"] for r in t["reasons"]]
    check("only the scale test fails", crit == ["envelope_scale"] and ratio > want, crit)
    check("diagnosis: scaled by 1.001", t["diagnosis"]["kind"] == "scaled" and
          abs(t["diagnosis"]["value"] - 1.001) < 1e-5, t.get("diagnosis"))
    check("the untouched tensor passes", tensors(rep)["/y"]["verdict"] == "pass")
    d = setup("scale_off", b, members=members)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("without the members' scales the same B passes", p.returncode == 0, p.stdout)
    d = setup("scale_honest", noisy(SIGMA, 13), members=members, scale_test=True)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("honest B passes the scale test", p.returncode == 0, p.stdout)


def test_scale_test_without_member_scales_fails_closed():
    d = setup("scale_missing", noisy(SIGMA, 14), scale_test=True)
    with h5py.File(os.path.join(d, "a.envelope.h5"), "a") as f:
        del f["y"].attrs["member_scale_err"]
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("scale_test 1 and a tensor without member_scale_err: exit 2 naming it",
          p.returncode == 2 and "member_scale_err" in json.dumps(rep) + p.stderr,
          (p.returncode, p.stderr))
    d = setup("scale_bad", noisy(SIGMA, 15))
    with h5py.File(os.path.join(d, "a.envelope.h5"), "a") as f:
        f.attrs["scale_test"] = 2
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("scale_test 2: exit 2", p.returncode == 2 and "scale_test" in p.stderr, p.stderr)


def test_median_beyond_the_members():
    """K = 2 members with their median element errors (root median_test 1, no scale test):
    three tests a tensor, alpha_t = ALPHA / (3 T), and at K = 2 the law takes nu = 1, so the
    median factor is 3 t_2(alpha_t / 2) (closed form). B = A + 0.5 SIGMA noise with its first m
    elements of /x moved by 70 SIGMA: its RMS error (about 50 SIGMA) and every element are
    within the envelope (the factors are about 84). With m = 2049 of 4096, B's median error (rank
    2048) is a moved element, beyond the bound of about 57 SIGMA: only the median test fails;
    with m = 2048 its median is an unmoved element and B passes. Read in 100-element blocks on
    2 threads, so the count is merged across parts."""
    members = [noisy(SIGMA, 800 + k) for k in range(2)]
    av = A["/x"].astype(np.float64)
    qk = [np.sort(np.abs(m["/x"].astype(np.float64) - av))[2047] for m in members]
    want_q = math.sqrt(np.mean(np.square(qk)))
    rms_a = math.sqrt(np.mean(av * av))
    want_floor = math.sqrt(want_q ** 2 + (2 * U32 * rms_a) ** 2)
    want_factor = GAP * t2_upper(ALPHA / (3 * 2) / 2)
    for moved, fails in ((2049, True), (2048, False)):
        b = noisy(SIGMA / 2, 16)
        x = b["/x"].astype(np.float64)
        x[:moved] += 70 * SIGMA
        b["/x"] = x.astype(np.float32)
        d = setup("median_%d" % moved, b, members=members, median_test=True)
        p, rep = run_json(["-j", "2", "--block-elems", "100", os.path.join(d, "a.h5"),
                           os.path.join(d, "b.h5")])
        t = tensors(rep)["/x"]
        env = t["envelope"]
        dist = np.abs(b["/x"].astype(np.float64) - av)
        above = int((dist > env["median_bound"]).sum())
        check("member_median = sqrt(mean q_k^2), q_k the rank-2048 |m_k - a| (numpy sort)",
              abs(env["member_median"] - want_q) <= 1e-12 * want_q, (env, want_q))
        check("median_floor = sqrt(member_median^2 + (2 u RMS(A))^2)",
              abs(env["median_floor"] - want_floor) <= 1e-9 * want_floor, env)
        check("median_factor = 3 t_2(alpha_t / 2), alpha_t = 0.01 / 6",
              abs(env["median_factor"] - want_factor) <= 1e-6 * want_factor, env)
        check("median_bound = factor floor", abs(env["median_bound"] - env["median_factor"] *
                                                  env["median_floor"]) <= 1e-12 * env["median_bound"])
        check("above_median = numpy's count beyond the bound (%d)" % moved,
              env["above_median"] == above == moved, (env["above_median"], above))
        crit = [r["criterion"] for r in t.get("reasons", [])]
        if fails:
            check("2049 of 4096 moved: only the median test fails, exit 1",
                  p.returncode == 1 and crit == ["envelope_median"], (p.returncode, crit))
            r = t["reasons"][0]
            check("reason: value 2049 / 4096, limit 2048 / 4096",
                  r["value"] == 2049 / 4096 and r["limit"] == 0.5, r)
            dg = t["diagnosis"]
            check("diagnosis: beyond the members' median", dg["kind"] == "beyond" and
                  dg["value"] == 2049 / 4096 and "typical element" in dg["text"], dg)
        else:
            check("2048 of 4096 moved: B's median is unmoved, it passes",
                  p.returncode == 0 and not crit, (p.returncode, crit))
    d = setup("median_off", b, members=members)
    b["/x"][2048] += np.float32(70 * SIGMA)
    write(os.path.join(d, "b.h5"), b)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("without the members' medians the same B passes", p.returncode == 0, p.stdout)
    d = setup("median_honest", noisy(SIGMA, 17), members=members, median_test=True,
              scale_test=True)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("honest B passes the median and scale tests", p.returncode == 0, p.stdout)


def test_zero_floor_reads_inf():
    """A tensor that is zero in A and in every member has a floor of 0: a B that differs there
    is beyond any factor, its ratio +inf in the JSON ("inf") as the judge takes it; a B that is
    zero there too passes with ratio 0."""
    z = {"/z": np.zeros(256, np.float32)}
    for name, bz, verdict, ratio in (("zero_floor_b", np.full(256, 1e-3, np.float32), "drift",
                                      "inf"), ("zero_floor_same", z["/z"], "pass", 0.0)):
        d = fresh(name)
        write(os.path.join(d, "a.h5"), z)
        write(os.path.join(d, "b.h5"), {"/z": bz})
        write_envelope(os.path.join(d, "a.envelope.h5"), z, [z, z])
        p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
        t = tensors(rep)["/z"]
        crit = [(r["criterion"], r["value"]) for r in t.get("reasons", [])]
        check("%s: floor 0, ratio %s, %s" % (name, ratio, verdict),
              t["envelope"]["floor"] == 0 and t["envelope"]["ratio"] == ratio and
              t["verdict"] == verdict and (verdict == "pass" or ("envelope", "inf") in crit),
              (t["envelope"], t["verdict"], crit))


def test_median_test_fails_closed():
    for name, edit, why in (
            ("median_missing", lambda f: f["y"].attrs.__delitem__("member_median_err"),
             "member_median_err"),
            ("median_negative", lambda f: f["x"].attrs.__setitem__(
                "member_median_err", np.array([-1.0] * 8)), "member_median_err"),
            ("median_bad", lambda f: f.attrs.__setitem__("median_test", 2), "median_test")):
        d = setup(name, noisy(SIGMA, 18), median_test=True)
        with h5py.File(os.path.join(d, "a.envelope.h5"), "a") as f:
            edit(f)
        p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
        check("%s: exit 2 naming %s" % (name, why),
              p.returncode == 2 and why in json.dumps(rep) + p.stderr, (p.returncode, p.stderr))


def bf16(x):
    """x (float32) rounded to bfloat16, to nearest even, as float32."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)).view(np.float32)


def test_grid_step_per_element():
    """B = A rounded to bfloat16 moves every element by at most half a bfloat16 step, 2^-9 |a|.
    Members 1e-7 apart: emulating float32, most elements are far beyond their bound (localized);
    emulating bfloat16, each bound holds one step of B's grid, 2 x 2^-8 |a_i|, four times the
    move: no element beyond (docs/envelope.md). An unknown `emulate` is an error."""
    tiny = [noisy(1e-7, 500 + k) for k in range(8)]
    b = {k: bf16(v) for k, v in A.items()}
    d = setup("grid32", b, members=tiny)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    t = tensors(rep)["/x"]
    check("emulating float32: B on the bfloat16 grid is localized", t["diagnosis"]["kind"] ==
          "localized" and t["envelope"]["beyond"] > 0, t.get("diagnosis"))
    d = setup("grid16", b, members=tiny, emulate="bfloat16")
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    for name, t in tensors(rep).items():
        check("%s: emulating bfloat16: no element beyond, grid_u 2^-8" % name,
              t["envelope"]["beyond"] == 0 and t["envelope"]["grid_u"] == 2.0 ** -8,
              t["envelope"])
    d = setup("gridbad", b, members=tiny, emulate="float8")
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("emulate float8: exit 2 naming the attribute", p.returncode == 2 and
          "emulate" in p.stderr, p.stderr)


def test_exact_structure_within_a_wide_envelope():
    """Members 60 % off (no digits): B zeroed still fails (exact), B within passes."""
    wide = [noisy(0.6, 200 + k) for k in range(8)]
    b = noisy(0.6, 5)
    b["/x"] = np.zeros_like(A["/x"])
    d = setup("zeroed", b, members=wide)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    t = tensors(rep)
    check("B zeroed fails inside any envelope", t["/x"]["verdict"] == "drift" and
          t["/x"]["diagnosis"]["kind"] == "zeroed", t["/x"].get("diagnosis"))
    check("B within a wide envelope passes", t["/y"]["verdict"] == "pass", t["/y"])


def test_indeterminate_only_where_spread_has_no_digits():
    wide = [noisy(0.6, 300 + k) for k in range(8)]
    d = setup("nodigit", noisy(6.0, 6), members=wide)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    for name, t in tensors(rep).items():
        check("%s: beyond an envelope that keeps no digit: indeterminate" % name,
              t["verdict"] == "indeterminate" and t["diagnosis"]["kind"] == "no_digits",
              (t["verdict"], t.get("diagnosis")))
    d = setup("digits", noisy(6.0 * SIGMA * 100, 7))
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    for name, t in tensors(rep).items():
        check("%s: 60 %% error where the envelope keeps digits is drift" % name,
              t["verdict"] == "drift", t["verdict"])


def test_another_a():
    d = setup("another", noisy(SIGMA, 8))
    write(os.path.join(d, "a.h5"), {k: v * 1.5 for k, v in A.items()})
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("an envelope measured on another A is an error (exit 2)", p.returncode == 2, p.stdout)
    check("its message says so", "another A" in json.dumps(rep), rep)


def test_b_sidecar_ignored_and_no_envelope():
    d = setup("bside", noisy(5 * SIGMA, 9))
    wide = [noisy(0.1, 400 + k) for k in range(8)]
    write_envelope(os.path.join(d, "b.envelope.h5"), A, wide)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("B's own sidecar widens nothing", p.returncode == 1, p.stderr)
    p, rep = run_json(["--no-envelope", os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("--no-envelope: no tensor carries an envelope",
          rep and all("envelope" not in t for t in rep["tensors"]), rep)
    p, rep = run_json(["--envelope", os.path.join(d, "b.envelope.h5"), os.path.join(d, "a.h5"),
                       os.path.join(d, "b.h5")])
    check("--envelope FILE is used as given", p.returncode == 0, p.stderr)


def test_bad_envelope_fails_closed():
    d = setup("bad", noisy(SIGMA, 10), version=2)
    p, rep = run_json([os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
    check("an envelope beside A that is not format 1 is exit 2", p.returncode == 2, p.stderr)
    check("naming the file", "a.envelope.h5" in p.stderr, p.stderr)


def test_folders_pair_no_sidecar():
    d = fresh("folders")
    for step in (1, 2):
        write(os.path.join(d, "A", "step_%d.h5" % step), A)
        write(os.path.join(d, "B", "step_%d.h5" % step), noisy(SIGMA, 20 + step))
        write_envelope(os.path.join(d, "A", "step_%d.envelope.h5" % step), A, MEMBERS)
    p, rep = run_json([os.path.join(d, "A"), os.path.join(d, "B")])
    check("folder run with sidecars passes", p.returncode == 0, p.stderr)
    paths = sorted(t["path"] for t in rep["tensors"])
    check("sidecars are not paired as dumps", paths == sorted(
        "step_%d.h5:%s" % (s, n) for s in (1, 2) for n in A), paths)
    check("each step judged with its envelope", all("envelope" in t for t in rep["tensors"]))


def test_trajectory_band():
    """A folder of 3 steps whose A carries a loss scalar and a K = 2 envelope: the Markdown
    trajectory's envelope column is the pass bound on |b - a| of the loss, factor x floor, with
    factor 3 t_2(alpha_t / 2) (nu = 1: one element) and floor sqrt(mean d_k^2 + (u_A a)^2); the
    HTML plot draws that band around A."""
    d = fresh("trajband")
    bands = []
    for step in (1, 2, 3):
        a = {"/loss": np.float32(2.0 / step), "/x": A["/x"]}
        mem = [{"/loss": np.float32(a["/loss"] + 1e-4 * (k + 1)), "/x": MEMBERS[k]["/x"]}
               for k in range(2)]
        write(os.path.join(d, "A", "step_%d.h5" % step), a)
        write(os.path.join(d, "B", "step_%d.h5" % step),
              {"/loss": np.float32(a["/loss"] + 1e-4), "/x": noisy(SIGMA, 40 + step)["/x"]})
        write_envelope(os.path.join(d, "A", "step_%d.envelope.h5" % step), a, mem)
        la = float(a["/loss"])
        d2 = np.mean([(float(m["/loss"]) - la) ** 2 for m in mem])
        floor = math.sqrt(d2 + (U32 * abs(la)) ** 2)
        bands.append(GAP * t2_upper(ALPHA / (2 * 2) / 2) * floor)
    md, html = os.path.join(d, "r.md"), os.path.join(d, "r.html")
    p = subprocess.run([BIN, "-q", "--markdown", md, "--html", html, os.path.join(d, "A"),
                        os.path.join(d, "B")], capture_output=True, text=True)
    text = open(md).read()
    rows = [ln for ln in text.splitlines() if ln.startswith("| `step_")]
    for k, band in enumerate(bands):
        check("step %d: envelope column +-%.3g" % (k + 1, band),
              len(rows) == 3 and rows[k].rstrip().endswith("\u00b1%.3g |" % band), rows)
    check("HTML: the envelope band is drawn", 'class="envelope"' in open(html).read())


def test_threads_and_blocks_identical():
    b = noisy(SIGMA, 11)
    b["/y"][5, 5] += 0.3
    d = setup("jobs", b)
    outs = []
    for j in ("1", "2", "8"):
        p, rep = run_json(["-j", j, "--block-elems", "100", os.path.join(d, "a.h5"),
                           os.path.join(d, "b.h5")])
        for t in rep["tensors"]:
            t.pop("timing", None)
        rep.pop("timing", None)
        outs.append(json.dumps(rep["tensors"], sort_keys=True))
    check("-j 1, 2, 8 with 100-element blocks: identical tensors", len(set(outs)) == 1)


def test_bound_read_direct_or_through_hdf5():
    """A contiguous bound is read by the workers straight from the file (docs/performance.md,
    "Direct reads"), a chunked one through HDF5: the same figures, with elements beyond."""
    b = noisy(SIGMA, 12)
    b["/x"][100:110] += 0.05
    d = setup("direct", b)
    env = os.path.join(d, "a.envelope.h5")
    chunked = os.path.join(d, "chunked.envelope.h5")
    with h5py.File(env, "r") as src, h5py.File(chunked, "w") as dst:
        for key, value in src.attrs.items():
            dst.attrs[key] = value
        for name in ("x", "y"):
            ds = dst.create_dataset(name, data=src[name][()], chunks=True)
            for key, value in src[name].attrs.items():
                ds.attrs[key] = value
    with h5py.File(env, "r") as f:
        check("the bound is contiguous", f["x"].chunks is None and f["x"].id.get_offset())
    outs = []
    for extra in ([], ["--envelope", chunked]):
        p, rep = run_json(["-j", "2", "--block-elems", "1000"] + extra +
                          [os.path.join(d, "a.h5"), os.path.join(d, "b.h5")])
        check("B beyond its envelope at 10 elements fails", p.returncode == 1, p.stderr)
        outs.append(json.dumps([t["envelope"] for t in rep["tensors"]], sort_keys=True))
    check("/x: 10 elements beyond", json.loads(outs[0])[0]["beyond"] == 10, outs[0])
    check("contiguous and chunked bounds: identical envelope figures", outs[0] == outs[1])


if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    sys.exit(run_tests([test_honest_passes, test_five_sigma_fails, test_law_closed_form_k2,
                        test_localized, test_event_members_keep_the_element_floor,
                        test_scale_beyond_the_members,
                        test_scale_test_without_member_scales_fails_closed,
                        test_median_beyond_the_members, test_median_test_fails_closed,
                        test_zero_floor_reads_inf,
                        test_grid_step_per_element,
                        test_exact_structure_within_a_wide_envelope,
                        test_indeterminate_only_where_spread_has_no_digits, test_another_a,
                        test_b_sidecar_ignored_and_no_envelope, test_bad_envelope_fails_closed,
                        test_folders_pair_no_sidecar, test_trajectory_band,
                        test_threads_and_blocks_identical,
                        test_bound_read_direct_or_through_hdf5]))
