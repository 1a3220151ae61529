// The scaling model's formulas (verify/scaling/sm_model.c) against values worked out
// by hand from the formulas written in sm_model.h, for a small case:
// alpha = 1 us, beta = 1 ns/byte, N = 1000 f32 parameters (4000 bytes), C = 8;
// and the pure parts of its measurements (sm_measure.h): the commands its
// children run and the rows of its predictions.
#include <math.h>
#include <string.h>

#include "par_test.h"
#include "sm_measure.h"
#include "sm_model.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b) + 1e-18; }

// a's words joined by '|'.
static const char *joined(const par_argv *a)
{
    static char buf[1024];
    buf[0] = '\0';
    for (int i = 0; i < a->n; i++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? "|" : "", a->v[i]);
    return buf;
}

static void test_commands(void)
{
    par_argv a = {0};
    sm_launch_argv(&a, "  ssh host{R}  mpirun -n {R}\t-x A={R}{R} ", "/bin/parity", 3);
    par_argv_add(&a, "model");
    sm_launch_end(&a, "x", 3);
    par_check(strcmp(joined(&a), "ssh|host3|mpirun|-n|3|-x|A=33|/bin/parity|model") == 0,
              "launcher: its words, every {R} replaced, then the binary; no --ranks");
    par_argv_free(&a);
    sm_launch_argv(&a, NULL, "/bin/parity", 2);
    par_argv_add(&a, "model");
    sm_launch_end(&a, NULL, 2);
    par_check(strcmp(joined(&a), "/bin/parity|model|--ranks|2") == 0,
              "no launcher: the binary's own --ranks last");
    par_argv_free(&a);
    const par_optim adam = {.kind = PAR_OPTIM_ADAM, .beta1 = 0.5, .beta2 = 0.25, .eps = 1e-8};
    const sm_setup s = {.dataset = "mnist", .model = "mlp:196-8-10", .act = "tanh",
                        .dtype = "f64", .optim = &adam, .upscale = 14, .batch = 32, .chunk = 4,
                        .steps = 5};
    sm_train_argv(&a, &s, "mpi", "fast");
    par_check(strcmp(joined(&a), "train|--trainer|mpi|--mode|fast|--dataset|mnist|--model|"
                                 "mlp:196-8-10|--act|tanh|--dtype|f64|--batch|32|--chunk|4|"
                                 "--steps|5|--json|--quiet|--no-digest|--optim|adam|--beta1|0.5|"
                                 "--beta2|0.25|--eps|1e-08|--upscale|14") == 0,
              "a training run's flags: the setting, adam's hyperparameters, --upscale");
    par_argv_free(&a);
}

// The predicted rows of a 2-layer MLP on 1000 samples, batch 16 per rank.
static void test_predictions(const sm_costs *c)
{
    par_model m;
    PAR_REQUIRE(par_model_parse(&m, "mlp:20-8-4", PAR_ACT_RELU));
    enum { MAX_R = 4 };
    const int n = sm_n_predictions(MAX_R);   // 2 designs x 8 batches x R = 1, 2, 4 x 2
    sm_prediction rows[96 + 1];
    par_check(n == 96 && sm_predictions(rows, 97, c, &m, 1000, 16, MAX_R) == 96,
              "predictions: 96 rows for R up to 4");
    par_check(sm_predictions(rows, 10, c, &m, 1000, 16, MAX_R) == 10, "predictions: cap kept");
    sm_predictions(rows, 96, c, &m, 1000, 16, MAX_R);
    // Row order: exact then fast; batch 64 .. 8192; R 1, 2, 4; strong then weak.
    int order = 1;
    for (int i = 0; i < 96; i++) {
        const int d = i / 48, b = i / 6 % 8, r = i / 2 % 3, weak = i % 2;
        const size_t Bg = (size_t)64 << b;
        order &= rows[i].design == (d ? SM_MPI_FAST : SM_MPI_EXACT) &&
                 rows[i].ranks == 1 << r && rows[i].weak == weak &&
                 rows[i].batch == (weak ? (size_t)16 << r : Bg);
    }
    par_check(order, "predictions: exact then fast, batch 64 .. 8192, R 1 2 4, strong then weak");
    // R = 1: speedup and efficiency 1 by definition, strong and weak.
    par_check(rows[0].speedup == 1 && rows[0].efficiency == 1 && rows[1].speedup == 1,
              "predictions at R = 1: speedup 1");
    // strong, fast, batch 128, R = 4 (row 48 + 6 + 4): ceil(1000 / 128) = 8 steps.
    sm_costs cg = *c;
    par_ring_split(&m, 128, &cg.chain_params, &cg.gather_values);
    const double t4 = sm_step_seconds(&cg, SM_MPI_FAST, 4, 128);
    const double t1 = sm_step_seconds(&cg, SM_MPI_FAST, 1, 128);
    const sm_prediction *p = &rows[58];
    par_check(p->design == SM_MPI_FAST && p->ranks == 4 && p->batch == 128 && !p->weak &&
                  near(p->epoch_s, 8 * t4) && near(p->speedup, t1 / t4) &&
                  near(p->efficiency, t1 / t4 / 4),
              "a strong row: 8 steps of the step time, speedup t1 / t4");
}

int main(void)
{
    test_commands();
    sm_costs c = {.t0 = 1e-4, .t_sample = 1e-5, .alpha = 1e-6, .beta = 1e-9, .n_params = 1000,
                  .elem_bytes = 4, .chunk = 8, .seg_params = 250, .chain_params = 1000};
    // mpi fast, P = 2: 2 (1) 1us + 2 (1/2) 4000 B 1ns = 2us + 4us
    par_check(near(sm_comm_seconds(&c, SM_MPI_FAST, 2, 64), 6e-6), "ring allreduce P=2");
    // an allreduce measured at 9us on 2 ranks, 1.5x the 6us above: P = 4 is
    // 1.5 x (2 (3) 1us + 2 (3/4) 4000 B 1ns) = 1.5 x 12us = 18us
    sm_costs ar = c;
    ar.t_allreduce = 9e-6;
    ar.allreduce_ranks = 2;
    par_check(near(sm_comm_seconds(&ar, SM_MPI_FAST, 4, 64), 18e-6),
              "ring allreduce P=4 scaled by the one measured on 2 ranks");
    // mpi exact, P = 2: 4 segments of 1000 B, 1us + 1us each: the chain
    // (4 + 0) 2us = 8us, the weights streamed (1) 1us + (1/2 4 + 0) 1us =
    // 3us: 11us
    par_check(near(sm_comm_seconds(&c, SM_MPI_EXACT, 2, 64), 11e-6), "ordered chain P=2");
    // mpi exact, P = 5: the chain (4 + 3) 2us = 14us, the weights
    // 4 (1us) + (4/5 4 + 3) 1us = 10.2us: 24.2us
    par_check(near(sm_comm_seconds(&c, SM_MPI_EXACT, 5, 64), 24.2e-6), "ordered chain P=5");
    // root fast, P = 4: 2 log2(4) (1us + 4us) = 20us
    par_check(near(sm_comm_seconds(&c, SM_ROOT_FAST, 4, 64), 20e-6), "reduce + bcast P=4");
    // root exact, P = 4, B = 64, nothing gathered: the losses 3 (1us + 64 x 4 B / 4
    // x 1ns) = 3.192us; 8 chunks, rank 0 owns 2: 6 (5us); the broadcast 2 (5us):
    // 43.192us
    par_check(near(sm_comm_seconds(&c, SM_ROOT_EXACT, 4, 64), 43.192e-6), "chunk gather P=4");
    // root exact with gathered layers (10 values a sample, 250 parameters
    // chained): the all-gather 3 (1us + 64 x 10 x 4 B / 4 x 1ns) = 4.92us;
    // the gathered rows to rank 0, 3/4 of 750 parameters streamed from 3
    // ranks: 3 (1us) + 3/4 3000 B x 1ns = 5.25us; the losses 3.192us; 6 (1us
    // + 1000 B x 1ns) = 12us, 2 (5us) = 10us: 35.362us
    sm_costs rg = c;
    rg.gather_values = 10;
    rg.chain_params = 250;
    par_check(near(sm_comm_seconds(&rg, SM_ROOT_EXACT, 4, 64), 35.362e-6), "root gathered P=4");
    par_check(sm_comm_seconds(&c, SM_MPI_EXACT, 1, 64) == 0, "no communication on one rank");
    // step, P = 3, B = 64: busiest rank ceil(8/3) = 3 chunks = 24 samples:
    // 100us + 240us + 2 (2) 1us + 2 (2/3) 4000 B 1ns = 340us + 4us + 5.333us,
    // + the ranks' per-step agreement 2 log2(4) 1us = 4us
    par_check(near(sm_step_seconds(&c, SM_MPI_FAST, 3, 64), 340e-6 + 4e-6 + 16e-6 / 3 + 4e-6),
              "step time P=3");
    // more ranks than chunks: the busiest rank still has one chunk of 8 samples
    // (+ the agreement 2 log2(16) 1us = 8us)
    par_check(near(sm_step_seconds(&c, SM_MPI_FAST, 16, 64) - sm_comm_seconds(&c, SM_MPI_FAST, 16, 64),
                   100e-6 + 80e-6 + 8e-6),
              "ranks beyond the chunk count add no compute saving");
    // mpi exact shards the update: t_update = 60us of t0 = 100us, t_panel = 20us;
    // P = 4, B = 64: 2 chunks = 16 samples: 40us + 60us/4 + 20us 3/4 = 70us,
    // + 160us, + comm (4 + 2) 2us + 3 (1us) + (3/4 4 + 2) 1us = 20us, + the
    // agreement 4us
    sm_costs u = c;
    u.t_update = 60e-6;
    u.t_panel = 20e-6;
    par_check(near(sm_step_seconds(&u, SM_MPI_EXACT, 4, 64), 70e-6 + 160e-6 + 20e-6 + 4e-6),
              "sharded update P=4");
    par_check(near(sm_step_seconds(&u, SM_MPI_EXACT, 1, 64), 100e-6 + 640e-6),
              "one rank: the whole update");
    par_check(near(sm_step_seconds(&u, SM_MPI_FAST, 4, 64) - sm_comm_seconds(&u, SM_MPI_FAST, 4, 64),
                   100e-6 + 160e-6 + 4e-6),
              "fast mode: every rank updates everything");
    // mpi exact with gathered layers: 750 of the 1000 parameters gathered,
    // 10 values per sample, so 1 segment along the chain. P = 2, B = 64:
    // the gather (1) (1us + 64 x 10 x 4 B / 2 x 1ns) = 2.28us, the chain
    // (1 + 0) 2us, the weights 1us + (1/2 4 + 0) 1us = 3us: 7.28us
    sm_costs g = c;
    g.chain_params = 250;
    g.gather_values = 10;
    par_check(near(sm_comm_seconds(&g, SM_MPI_EXACT, 2, 64), 7.28e-6), "gathered layers P=2");
    // P = 4: the gather 3 (1us + 2560 B / 4 x 1ns) = 4.92us, the chain
    // (1 + 2) 2us = 6us, the weights 3 (1us) + (3/4 4 + 2) 1us = 8us: 18.92us
    par_check(near(sm_comm_seconds(&g, SM_MPI_EXACT, 4, 64), 18.92e-6), "gathered layers P=4");
    // everything gathered: no chain at all; P = 2: 2.28us + 3us
    g.chain_params = 0;
    par_check(near(sm_comm_seconds(&g, SM_MPI_EXACT, 2, 64), 5.28e-6), "no chain P=2");
    // one host, one shared copy of the weights and of the gathered rows: P = 4,
    // no weights ring but two barriers 2 log2(4) 1us = 4us, no gather; with
    // the chain 6us: 10us
    g.chain_params = 250;
    g.one_host = 1;
    par_check(near(sm_comm_seconds(&g, SM_MPI_EXACT, 4, 64), 10e-6), "shared weights and rows P=4");
    // and no panels to recompute: 40us + 60us/4 = 55us, + 160us of samples, + 4us
    sm_costs h = u;
    h.one_host = 1;
    par_check(near(sm_step_seconds(&h, SM_MPI_EXACT, 4, 64) - sm_comm_seconds(&h, SM_MPI_EXACT, 4, 64),
                   55e-6 + 160e-6 + 4e-6),
              "shared weights: no panel recompute");
    // the update measured on 2 threads sharing the weights at 45us each (not the
    // 30us of an even split): at P = 4 each rank's share is 45us x 2 / 4 = 22.5us,
    // so 40us + 22.5us + 160us + 4us
    sm_costs hs = h;
    hs.t_update_shared = 45e-6;
    hs.update_shared_ranks = 2;
    par_check(near(sm_step_seconds(&hs, SM_MPI_EXACT, 4, 64) - sm_comm_seconds(&hs, SM_MPI_EXACT, 4, 64),
                   62.5e-6 + 160e-6 + 4e-6),
              "shared weights: the update's share as measured on threads that share them");
    // across hosts (own copies) it does not apply: u's 70us + 160us + 4us
    hs.one_host = 0;
    par_check(near(sm_step_seconds(&hs, SM_MPI_EXACT, 4, 64) - sm_comm_seconds(&hs, SM_MPI_EXACT, 4, 64),
                   70e-6 + 160e-6 + 4e-6),
              "own copies: the update divides");
    // ranks sharing cores: 4 cores that slow each other by 1.3 when all are busy,
    // 20us a step outside the engine. P = 3 (fast): slow = 1 + 0.3 (3 - 1) / (4 - 1)
    // = 1.2; 3 chunks = 24 samples: (100us + 240us + 20us) 1.2 = 432us, + 4us
    sm_costs k = c;
    k.t_run = 20e-6;
    k.cores = 4;
    k.contention = 1.3;
    par_check(near(sm_step_seconds(&k, SM_MPI_FAST, 3, 64) - sm_comm_seconds(&k, SM_MPI_FAST, 3, 64),
                   432e-6 + 4e-6),
              "contention of 3 busy cores of 4");
    // P = 8 on the 4 cores: 1 chunk each, slow = 1.3 x 8 / 4 = 2.6:
    // (100us + 80us + 20us) 2.6 = 520us, + 2 log2(8) 1us = 6us
    par_check(near(sm_step_seconds(&k, SM_MPI_FAST, 8, 64) - sm_comm_seconds(&k, SM_MPI_FAST, 8, 64),
                   520e-6 + 6e-6),
              "8 ranks take turns on 4 cores");
    // P = 3 on 2 cores that do not slow each other: one core holds two of the
    // ranks, and each step waits for both: slow = ceil(3 / 2) = 2 (not 1.5):
    // 3 chunks = 24 samples, (100us + 240us + 20us) 2 = 720us, + 2 log2(4) 1us
    sm_costs k2 = k;
    k2.cores = 2;
    k2.contention = 1;
    const double t3 = sm_step_seconds(&k2, SM_MPI_FAST, 3, 64);
    par_check(near(t3 - sm_comm_seconds(&k2, SM_MPI_FAST, 3, 64), 720e-6 + 4e-6),
              "3 ranks on 2 cores: the busiest core sets the pace");
    // and taking turns costs 1.2x more where each rank has its own weights:
    // (100us + 240us + 20us) 2 x 1.2 = 864us, + 4us; not for mpi exact on one
    // host (one shared copy): 100us - 0 + 0/3 + 240us + 20us, x 2, + 4us
    sm_costs k3 = k2;
    k3.turns = 1.2;
    par_check(near(sm_step_seconds(&k3, SM_MPI_FAST, 3, 64) - sm_comm_seconds(&k3, SM_MPI_FAST, 3, 64),
                   864e-6 + 4e-6),
              "3 ranks on 2 cores, each its own weights: the turns' cost");
    k3.one_host = 1;
    par_check(near(sm_step_seconds(&k3, SM_MPI_EXACT, 3, 64) - sm_comm_seconds(&k3, SM_MPI_EXACT, 3, 64),
                   720e-6 + 4e-6),
              "3 ranks on 2 cores sharing one copy of the weights: no turns' cost");
    // one rank: no contention, no agreement: 100us + 640us + 20us
    par_check(near(sm_step_seconds(&k, SM_MPI_FAST, 1, 64), 760e-6), "one rank on 4 cores");
    // a short last batch: B = 20, P = 1: all 20 samples
    par_check(near(sm_step_seconds(&c, SM_MPI_FAST, 1, 20), 100e-6 + 200e-6), "short batch P=1");
    // compute read off measured points (b, t) = (8, 100us), (16, 150us), (64,
    // 400us): 12 samples 125us; 32: 150us + 16 x 250us / 48 = 233.333us; 4 and
    // 128 along the end segments: 100us - 4 x 6.25us = 75us, 400us + 64 x
    // 250us / 48 = 733.333us; t0 and t_sample no longer count
    sm_costs pt = c;
    pt.n_points = 3;
    const double pb[] = {8, 16, 64}, ptt[] = {100e-6, 150e-6, 400e-6};
    for (int i = 0; i < 3; i++) pt.point_b[i] = pb[i], pt.point_t[i] = ptt[i];
    par_check(near(sm_compute_seconds(&pt, 12), 125e-6) &&
                  near(sm_compute_seconds(&pt, 32), 700e-6 / 3) &&
                  near(sm_compute_seconds(&pt, 4), 75e-6) &&
                  near(sm_compute_seconds(&pt, 128), 2200e-6 / 3) &&
                  near(sm_compute_seconds(&pt, 16), 150e-6),
              "compute between and beyond the measured points");
    // P = 2, B = 64: 32 samples a rank, 233.333us + the ring 6us + the agreement 2us
    par_check(near(sm_step_seconds(&pt, SM_MPI_FAST, 2, 64), 700e-6 / 3 + 6e-6 + 2e-6),
              "step time from the measured points P=2");
    // the compute scale moves the points too: x 2 at 12 samples is 250us
    sm_scale_compute(&pt, 2);
    par_check(near(sm_compute_seconds(&pt, 12), 250e-6), "scaled points");
    test_predictions(&c);
    return par_test_exit();
}
