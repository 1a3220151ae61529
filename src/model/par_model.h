// Network description and its one flat parameter layout. This module does no
// arithmetic on activations (that is src/kernels, and reference/ on its own):
// it parses a model spec, lays out every parameter in one buffer with a table
// of named views, and draws the initial values.
#ifndef PAR_MODEL_H
#define PAR_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "par_dtype.h"
#include "par_status.h"

#define PAR_MAX_LAYERS 16
#define PAR_MAX_VIEWS (5 * PAR_MAX_LAYERS)   // batchnorm has five

typedef enum par_act { PAR_ACT_NONE = 0, PAR_ACT_RELU, PAR_ACT_SIGMOID, PAR_ACT_TANH } par_act;

// The layer kinds of the engine's layer table (src/train/par_layers.c): each
// kind has forward, input-gradient and weight-gradient ops with a stated
// summation order (src/kernels/par_kernels.h, par_conv.h).
typedef enum par_layer_kind {
    PAR_LAYER_DENSE = 0,    // y = act(x W^T + b)
    PAR_LAYER_CONV2D = 1,   // y = act(conv(x, W) + b), zero padding, stride
    PAR_LAYER_MAXPOOL = 2,  // y = max over K x K windows, stride K; no parameters
    PAR_LAYER_BATCHNORM = 3,   // y = act(gamma (x - mean) / sqrt(var + eps) + beta) per channel
} par_layer_kind;
#define PAR_N_LAYER_KINDS 4

// One layer. Every layer maps a sample of n_in values to n_out values; an
// image is stored (c, h, w) row-major, so "flatten" is only a change of view.
// The last layer is dense with act NONE: its outputs are the logits of
// softmax + xent.
//   dense:   n_in, n_out; W: (n_out, n_in), b: (n_out).
//   conv2d:  (c_in, h_in, w_in) -> (c_out, h_out, w_out), K x K kernel, stride,
//            pad; h_out = (h_in + 2 pad - K) / stride + 1; W: (c_out, c_in, K, K)
//            as torch.nn.Conv2d, b: (c_out).
//   maxpool: (c, h_in, w_in) -> (c, h_in / K, w_in / K), windows K x K, stride K.
//   batchnorm: (c, h, w) -> (c, h, w) (after a dense layer: h = w = 1), per
//            channel: weight gamma (c), bias beta (c), and beside them the
//            running statistics running_mean (c), running_var (c) and
//            num_batches_tracked (1), as in PyTorch's state_dict; stat_view is
//            the first of those three views. Rows: c rows of one value.
// Parameter rows: W is n_rows rows of row_len values (dense n_out x n_in,
// conv c_out x c_in K K, maxpool none); row o's bias is b[o]. Threads and MPI
// segments split parameters by rows.
// Batchnorm's constants, PyTorch's defaults, each rounded once to the dtype.
#define PAR_BN_EPS 1e-5
#define PAR_BN_MOMENTUM 0.1

typedef struct par_layer {
    par_layer_kind kind;
    par_act act;              // applied to the output (NONE for maxpool)
    size_t n_in, n_out;       // values per sample
    size_t n_rows, row_len;   // parameter rows (0 for maxpool)
    int w_view, b_view;       // indices into par_model.views; -1 without parameters
    int stat_view;            // batchnorm: running_mean, then running_var and
                              //   num_batches_tracked follow; -1 otherwise
    size_t c_in, h_in, w_in;  // spatial shapes (dense: n_in x 1 x 1 -> n_out x 1 x 1)
    size_t c_out, h_out, w_out;
    size_t K, stride, pad;    // conv2d and maxpool (dense: 1, 1, 0)
} par_layer;

// A named slice of the parameter buffer: elements [offset, offset + count),
// row-major with the given shape. Names are "layer<i>.weight", "layer<i>.bias".
typedef struct par_view {
    char name[32];
    size_t offset, count;
    int ndim;
    size_t shape[4];
} par_view;

typedef struct par_model {
    char spec[128];            // as given, e.g. "mlp:784-256-128-10"
    int is_cnn;                // spec is cnn:... (activations written in the spec)
    int n_layers;
    par_layer layers[PAR_MAX_LAYERS];
    int n_views;
    par_view views[PAR_MAX_VIEWS];
    size_t n_params;           // total elements of the buffer
    size_t n_inputs;           // features per sample
    size_t n_classes;          // outputs of the last layer
    size_t max_width;          // widest layer input/output, for scratch sizing
} par_model;

// Parses a model spec. Fails with PAR_ERR_CONFIG and a message naming the
// spec, the bad token and what was expected.
//   mlp:N0-N1-...-Nk   dense layers N0 -> N1 -> ... -> Nk; every hidden layer
//                      gets `act`, the last none.
//   cnn:CxHxW-T-T-...  input C channels of H x W, then tokens (act is unused):
//     cN[kK][pP][sS]   conv2d to N channels, K x K kernel (default 3), zero
//                      padding P (default 0), stride S (default 1)
//     mK               max-pool K x K, stride K
//     bn               batchnorm over the channels of the previous conv or fc
//     r | sg | th      ReLU, sigmoid or tanh on the previous conv or fc
//     f                flatten (required before the first fc after an image)
//     fcN              dense to N outputs; the last token is the logits' fc
//   e.g. cnn:1x28x28-c32k3p1-r-f-fc128-r-fc10.
par_status par_model_parse(par_model *m, const char *spec, par_act act);

// "relu" | "sigmoid" | "tanh" -> act; PAR_ERR_CONFIG otherwise.
par_status par_act_parse(par_act *act, const char *name);
const char *par_act_name(par_act act);

// Initial parameters into `params` (n_params elements of dtype dt):
// weights (2u - 1) a, u uniform in [0, 1), i.e. in [-a, a), with
// a = sqrt(6 / fan_in) (He, for ReLU layers) or sqrt(6 / (fan_in + fan_out))
// (Xavier, otherwise), biases 0; dense fan_in = n_in, fan_out = n_out; conv
// fan_in = c_in K K, fan_out = c_out K K (PyTorch's definitions). Element i of
// layer l is a function of (seed, l, i) only: drawn in f64, rounded once.
void par_model_init(const par_model *m, par_dtype dt, uint64_t seed, void *params);

// Multiply-adds of one sample's forward pass (dense n_in n_out, conv2d
// c_out h_out w_out c_in K K, max-pool and batchnorm one per input value): a
// measure of work for estimates (the backward pass is about twice this).
double par_model_macs(const par_model *m);

#endif
