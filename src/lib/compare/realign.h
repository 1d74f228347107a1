/* Re-aligning the dumper's call indices (README, "Name mapping"): python/paritycheck/dump.py
 * names a module call /activations/NNN_module.path, NNN counting calls, so one extra call on one
 * side shifts the index of every later one and no later name pairs. Internal to the library. */
#ifndef PC_REALIGN_H
#define PC_REALIGN_H

#include "pairing.h"

/** When names with a call index (a path component "NNN_rest") are left unpaired on both sides
 * with the same name but for the index, re-pairs every such name of p by (its name without
 * the indices, occurrence in call order): the k-th call of a module in A with its k-th call in
 * B. Names without a call index keep their pairs. Then p->realigned counts the pairs that
 * differ from pairing by the full name and p->realigned_first is the index in p->m of the
 * first of them (-1 when none); p->both and p->n follow the new pairs, B's lone datasets
 * after A's in B's order, suggestions unset (-1). Expects pc_pairing_build's layout: the
 * a_count entries with an A side first. PC_ENOMEM. */
int pc_realign(pc_pairing *p);

#endif
