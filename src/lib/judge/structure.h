/* Structure (docs/tolerance-model.md, "Structure" and "Diagnosis"): what a tensor's difference
 * looks like, from its figures and its pc_evidence. Honest drift is B = A (1 + delta) + eps, with
 * delta and eps small, nearly mean-free and unrelated to an element's position; each test here
 * measures a signature that such drift cannot produce, against the largest value rounding gives
 * it. Internal to the judge. */
#ifndef PC_STRUCTURE_H
#define PC_STRUCTURE_H

#include <paritycheck/result.h>

/** The structural signature of t, if any: fills d (kind, value, statistic, limit, structural
 * true) and returns true; else returns false and leaves d's kind NONE. Needs real float figures
 * (t->stats.ev.pairs > 0); u: the unit roundoff t is judged at. */
bool pc_structure_find(const pc_tensor *t, double u, pc_diagnosis *d);

/** Whether a structure of this kind stays beyond honest reach even where B keeps no significant
 * digit: NaN or inf injected, B zeroed, constant or shifted. The others (a factor, crossings, a
 * permutation) measure an error against the size honest error can take, which a reference that
 * finds B without digits (kappa u >= 1/2) removes. */
bool pc_diagnosis_exact(pc_diagnosis_kind k);

/** How far apart two RMS of n honest noise terms of one scale can lie: the square root of the
 * F(n, n) quantile at the structure tests' false-alarm probability (n clamped to [2, 4096]:
 * 1.08 at 4096 is kept beyond, where GSL's inverse stops converging and the exact bound is
 * nearer 1). */
double pc_rms_ratio_bound(uint64_t n);

/** Whether the greater part of t's error lies along A: at least half its energy, beyond the
 * beta tail of isotropic noise (the structure tests' false-alarm probability). Honest rounding
 * spreads its error over every direction, however ill-conditioned the tensor; an epsilon, a
 * missing correction or a wrong normalisation puts most of theirs along A. */
bool pc_scale_dominates(const pc_tensor *t);

/** What a failing tensor without a structural signature looks like: "looks like A rounded to
 * bf16" when B is that on most elements, else noise-like (PC_DIAG_NOISE, value rel_rms). */
pc_diagnosis pc_structure_noise(const pc_tensor *t);

#endif
