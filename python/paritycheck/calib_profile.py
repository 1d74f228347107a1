"""paritycheck.calibrate's profile: the tolerance model's constants and the YAML text a
calibration writes (the base profile with coefficients set in its `defaults: all:` block).
Part of `python3 -m paritycheck.calibrate` (docs/calibrate.md); the fit, the cross-validation and
the report build on it."""
import math
import os
import re
import shutil

# ---- the model's constants (docs/tolerance-model.md) ------------------------------------------

# The run's trend (docs/tolerance-model.md, "The run's trend"): fixed, not fitted.
TREND_GROWTH = 4.0    # G: honest error may grow 4x over the largest of the last W tensors
TREND_WINDOW = 8      # W
TREND_CREST = 45.0    # P: twice the largest crest factor of an honest error the trend forgives
RTOL_U, RTOL_SQRT_K = 2.0, 1.0
# The rule's constants (docs/tolerance-model.md, "Calibration").
MARGIN = 3.0
SCALE_SE_Z = 3.0
SCALE_U_FLOOR = 1.0   # a systematic scale of one rounding of u is what normalisations do
NOISE_REL_RMS = 0.25  # an honest tensor this far off is rounding noise on both sides
# The noise floor is at least what the model gives: a bias gradient's noise is a sum of up to
# 4096 terms rounded in fp32 (sqrt(4096) u_fp32) or its inputs rounded to the profile's u (4 u).
NOISE_FLOOR_MIN = (64 * 2.0 ** -24, 8.0)
# A MobileNetV2-like net with batch 2 drifts 2e-5 in rel_rms between honest fp32 runs at its
# late layers (issue 13); the fp32 floor is twice that.
REL_RMS_U_MIN = {"float32": 2 * 2e-5 / 2.0 ** -24}
CREST_OF_FLOOR = 5.0  # atol_rms is at least 5 x max_rel_rms_u: an element 5 RMS errors out
NOISE_U_MAX = 64.0    # a tensor further from zero is not rounding noise: the trend must cover it
NOISE_VALUE = 2.0 ** -10  # PC_NOISE_VALUE of src/lib/judge/judge.c

UNIT = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "tf32": 2.0 ** -11, "float16": 2.0 ** -11,
        "bfloat16": 2.0 ** -8, "float8_e4m3fn": 2.0 ** -4, "float8_e5m2": 2.0 ** -3}

COEFFICIENTS = ["atol_rms", "rtol_u", "rtol_sqrt_k", "max_rel_rms_u", "max_scale_u",
                "max_scale_u_sqrt_n", "scale_z", "trend_growth", "trend_growth_backward",
                "trend_window", "trend_crest", "noise_floor_u"]


class Refused(Exception):
    """Calibration cannot give a profile worth writing; the message says why (exit 2)."""


def round_up(x, digits=2):
    """x rounded up to `digits` significant digits; 0 for x <= 0."""
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x)) - digits + 1
    return math.ceil(round(x / 10 ** e, 9)) * 10 ** e


# ---- profile text ------------------------------------------------------------------------------

def fmt(v):
    return "%.6g" % v


def _defaults_all_block(lines):
    """(index of the `all:` line, end index, key indent) of the block-style `defaults: all:`
    mapping of a profile, or None where the file has no `defaults:`. Raises Refused for flow
    style, which this editor does not rewrite."""
    d = None
    for i, ln in enumerate(lines):
        if re.match(r"defaults\s*:", ln):
            d = i
            if not re.match(r"defaults\s*:\s*(#.*)?$", ln):
                raise Refused("the base profile's `defaults:` is not in block style; write it "
                              "as `defaults:` then `  all:` on their own lines")
            break
    if d is None:
        return None
    i = d + 1
    while i < len(lines):
        ln = lines[i]
        if ln.strip() and not ln.lstrip().startswith("#") and not ln.startswith(" "):
            break  # the next top-level key
        m = re.match(r"(\s+)all\s*:\s*(.*)$", ln)
        if m:
            rest = m.group(2).split("#")[0].strip()
            if rest:
                raise Refused("the base profile's `defaults: all:` is in flow style; write one "
                              "key per line")
            ind = None
            j = i + 1
            while j < len(lines):
                lj = lines[j]
                if lj.strip() and not lj.lstrip().startswith("#"):
                    k = len(lj) - len(lj.lstrip())
                    if k <= len(m.group(1)):
                        break
                    ind = ind or k
                j += 1
            while j > i + 1 and not lines[j - 1].strip():
                j -= 1
            return i, j, ind or len(m.group(1)) + 2
        i += 1
    return d, d + 1, None


def profile_text(base_text, c, notes=None, header=None):
    """base_text with the coefficients c set in its `defaults: all:` block (added where
    missing), each followed by notes[key] as a comment, and header lines prepended."""
    lines = base_text.splitlines()
    if header is not None:  # the base's own header describes the base, not this profile
        while lines and (lines[0].startswith("#") or not lines[0].strip()):
            lines.pop(0)
    blk = _defaults_all_block(lines)
    if blk is None:
        lines += ["", "defaults:", "  all:"]
        start, end, ind = len(lines) - 1, len(lines), 4
    else:
        start, end, ind = blk
        if ind is None:  # `defaults:` without `all:`
            lines.insert(start + 1, "  all:")
            start, end, ind = start + 1, start + 2, 4
    block = lines[start + 1:end]
    for k in COEFFICIENTS:
        if k not in c:
            continue
        new = "%s%s: %s" % (" " * ind, k, fmt(c[k]))
        if notes and notes.get(k):
            new += "  # " + notes[k]
        for n, ln in enumerate(block):
            if re.match(r"\s+%s\s*:" % k, ln):
                block[n] = new
                break
        else:
            block.append(new)
    lines[start + 1:end] = block
    head = ["# " + h if h else "#" for h in (header or [])]
    if header is not None:
        head.append("")
    return "\n".join(head + lines) + "\n"


def base_value(base_text, key):
    """The value of `key` in the base profile's `defaults: all:` block, as a string, or None."""
    lines = base_text.splitlines()
    blk = _defaults_all_block(lines)
    if not blk or blk[2] is None:
        return None
    for ln in lines[blk[0] + 1:blk[1]]:
        m = re.match(r"\s+%s\s*:\s*([^#\s]+)" % key, ln)
        if m:
            return m.group(1)
    return None


def overridden_keys(base_text):
    """Fitted keys that the base profile also sets outside `defaults: all:` (a dtype's defaults
    or a rule); those tensors keep the base's value, which the fit does not see."""
    lines = base_text.splitlines()
    blk = _defaults_all_block(lines)
    inside = set(range(blk[0], blk[1])) if blk else set()
    out = set()
    for i, ln in enumerate(lines):
        if i in inside:
            continue
        for k in COEFFICIENTS:
            if re.search(r"(^|[\s{,])%s\s*:" % k, ln.split("#")[0]):
                out.add(k)
    return sorted(out)


def find_profile(name, binary):
    """The text of a profile given as a path or a shipped name (as --profile looks for it:
    $PARITYCHECK_TOLERANCES, PREFIX/share/paritycheck/tolerances beside the binary, the
    source tree)."""
    if os.path.isfile(name):
        with open(name) as f:
            return f.read()
    dirs = []
    if os.environ.get("PARITYCHECK_TOLERANCES"):
        dirs.append(os.environ["PARITYCHECK_TOLERANCES"])
    real = shutil.which(binary) or binary
    dirs.append(os.path.join(os.path.dirname(os.path.abspath(real)), "..", "share", "paritycheck",
                             "tolerances"))
    here = os.path.dirname(os.path.abspath(__file__))
    dirs.append(os.path.join(here, "..", "..", "tolerances"))
    for d in dirs:
        p = os.path.join(d, name + ".yaml")
        if os.path.isfile(p):
            with open(p) as f:
                return f.read()
    raise Refused("base profile %r is neither a file nor a shipped profile (looked in %s)"
                  % (name, ", ".join(os.path.normpath(d) for d in dirs)))

