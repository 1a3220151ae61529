// The layer table (see par_layers.h).
#include "par_layers.h"

#include <assert.h>

static const par_layer_ops *const table[PAR_N_LAYER_KINDS] = {
    [PAR_LAYER_DENSE] = &par_layer_dense,
    [PAR_LAYER_CONV2D] = &par_layer_conv2d,
    [PAR_LAYER_MAXPOOL] = &par_layer_maxpool,
    [PAR_LAYER_BATCHNORM] = &par_layer_batchnorm,
};

const par_layer_ops *par_layer_ops_of(par_layer_kind kind)
{
    assert((int)kind >= 0 && (int)kind < PAR_N_LAYER_KINDS && table[kind]);
    return table[kind];
}
