// How the engine splits its work among threads (declared in par_engine.h):
// samples for the forward and backward passes, parameter rows for the
// weight gradient and the update. The split decides only who computes an
// element, never how: every element is computed as in one thread. Tested
// by every trainer test run on several threads (tests/unit/test_trainers.c).
#include "par_layers.h"

void par_split(size_t n, size_t quantum, int t, int T, size_t *lo, size_t *hi)
{
    const size_t blocks = (n + quantum - 1) / quantum;
    const size_t b0 = blocks * (size_t)t / (size_t)T, b1 = blocks * (size_t)(t + 1) / (size_t)T;
    *lo = b0 * quantum < n ? b0 * quantum : n;
    *hi = b1 * quantum < n ? b1 * quantum : n;
}

void par_split_range(size_t a, size_t b, int t, int T, size_t *lo, size_t *hi)
{
    par_split(b - a, 4, t, T, lo, hi);
    *lo += a;
    *hi += a;
}

// Multiples of 4 samples (a thread's per-sample losses stay off the other
// thread's cache lines), the same in forward and backward: a thread's samples
// go from the input to the loss and back without waiting for another thread.
void par_engine_own_samples(size_t s0, size_t s1, int t, int T, size_t *lo, size_t *hi)
{
    par_split_range(s0, s1, t, T, lo, hi);
}

// A dense layer whose weights outweigh its inputs (more outputs than samples)
// splits its forward by rows on several threads: each thread then streams only
// the transposed panel it wrote itself in the last update, and reads the
// samples' inputs instead. Split by samples, every thread would read every
// weight, so that next step's update would find each line it writes held by
// the other core too (docs/performance.md). The price is a barrier after the
// layer.
int par_engine_splits_samples(const par_engine *e, int l, size_t n, int T)
{
    const par_layer *ly = &e->m->layers[l];
    if (!e->ops[l]->per_sample) return 0;
    return !(T > 1 && !e->samples_only && ly->kind == PAR_LAYER_DENSE && (size_t)ly->n_out > n);
}

// The same rows in every phase (transpose, weight gradient, update, and the
// forward of a wide dense layer: par_engine_splits_samples), so that a thread
// updates the rows whose gradient it computed, with no barrier between, and
// reads next step the panel it wrote. Dense layers take multiples of
// PAR_DENSE_OB rows, conv layers (few, long rows) of 4.
void par_engine_own_rows(const par_layer *ly, int t, int T, size_t *lo, size_t *hi)
{
    par_split(ly->n_rows, ly->kind == PAR_LAYER_DENSE ? PAR_DENSE_OB : 4, t, T, lo, hi);
}

void par_own_chunks(size_t n_chunks, int r, int P, size_t *c0, size_t *c1)
{
    const size_t base = n_chunks / (size_t)P, extra = n_chunks % (size_t)P, ur = (size_t)r;
    *c0 = ur * base + (ur < extra ? ur : extra);
    *c1 = *c0 + base + (ur < extra);
}

void par_own_samples(size_t B, size_t C, int r, int P, size_t *s0, size_t *s1)
{
    size_t c0, c1;
    par_own_chunks(par_n_chunks(B, C), r, P, &c0, &c1);
    *s0 = c0 * C < B ? c0 * C : B;
    *s1 = c1 * C < B ? c1 * C : B;
}
