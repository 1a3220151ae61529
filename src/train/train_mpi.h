// The MPI trainers' state (train_mpi.c: the step and the trainer table;
// train_mpi_setup.c: the row segments, the shared weights, creation and
// destruction). Not a public header: only those two files include it. Built
// with MPI only.
#ifndef TRAIN_MPI_H
#define TRAIN_MPI_H

#include <mpi.h>

#include "par_engine.h"
#include "par_governor.h"

typedef struct segment {
    int layer;
    size_t o0, o1;               // rows of the layer
} segment;

typedef struct mpi_state {
    par_engine e;
    int is_root_design;
    MPI_Comm comm;
    int rank, size;
    MPI_Datatype real_t;
    segment *seg;
    int n_seg;
    int *owner;                  // segment -> the rank that updates it (exact mpi/hybrid)
    int *seg_req;                // segment -> index of its first phase-1 send request
    int g_partial, os_partial;   // other ranks' segments of e.g / e.os not current here
    // The segments other ranks own, adjacent ones of a layer as one piece: the
    // segments before and after this rank's block, cut at layer ends (one
    // layer possibly twice). Their panel columns follow the weights received.
    par_rows others[PAR_MAX_LAYERS + 1];
    int n_others;
    // exact mpi/hybrid: layers whose weight gradient the owners compute from
    // every sample's input and output gradient, gathered from all ranks
    // (gathered_layer), instead of the chain; the rows this rank owns of them.
    int gathered[PAR_MAX_LAYERS];
    par_rows mine[PAR_MAX_LAYERS];
    int n_mine;
    int *counts, *displs;        // per rank, for MPI_Allgatherv
    // exact mpi/hybrid with every rank on one host: the weights and their
    // panels live once, in an MPI shared-memory window that every rank maps;
    // owners update their rows in place, between two node_sync of a step.
    // The gathered layers' a[l] (l > 0) and d[l] live in the window too.
    int shared;
    MPI_Win win;
    void *x_shared;              // shared, gathered first layer: the batch's inputs, once
    void *chunk_g;               // root exact: one chunk's gradient of the chained layers
    MPI_Request *reqs;
    int n_reqs, cap_reqs;
    par_trainer_stats stats;
    double bytes, comm_s;        // totals of this rank
    par_governor gov;            // how many threads the next step runs on
} mpi_state;

// A rank's state for trainer `mpi` (threads 1, root_design 0), `hybrid`
// (cfg->threads, 0) or `root` (cfg->threads, 1): the engine, the segments
// and their owners, the weights in a shared window where they can be, the
// batchnorm ring. Collective. On failure nothing is left behind.
par_status par_ring_create(const par_run_cfg *cfg, void **state, int threads, int root_design);
void par_ring_destroy(void *state);

// The shared window's synchronisation (MPI's unified memory model): every
// rank's stores to the window before it are visible to every rank's loads
// after it.
void par_ring_node_sync(mpi_state *s);

#endif
