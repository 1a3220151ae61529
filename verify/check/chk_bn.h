// Batchnorm in the MPFR step check (chk_bn.c). Not a public header: only
// chk_step.c, which runs the stages, and chk_bn.c include it.
#ifndef CHK_BN_H
#define CHK_BN_H

#include "chk_mpfr.h"

// Statistics and outputs of layer l, its dgamma, dbeta and input gradient
// (l >= 1), and the update of its parameters and running statistics. Called
// by every thread of the check's parallel region.
void chk_bn_forward(ctx *c, ws *w, int l);
void chk_bn_backward(ctx *c, ws *w, int l);
void chk_bn_update(ctx *c, ws *w, int l);
// The n of gamma_n of a batchnorm batch sum: a term goes through at most
// min(B, C) P - 1 roundings in its chunk's chain and ceil(B / C) - 1 in the
// fold of the chunks; counted as min(B, C) P + ceil(B / C) - 1.
size_t chk_bn_rounds(const par_layer *ly, size_t B, size_t C);

#endif
