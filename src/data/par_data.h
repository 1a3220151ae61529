// Datasets: IDX files (raw or .gz) and CIFAR-10 binary files of 8-bit images
// and labels, found by name or folder, split into training / validation /
// test, optionally resampled to S x S (--upscale), and gathered into batches
// of the run's dtype. Pixels stay uint8 in memory; a batch converts them as
// pixel / 255 in the run's dtype (one correctly rounded division). Resampled
// images are held as values of the run's dtype, computed once at load time.
#ifndef PAR_DATA_H
#define PAR_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "par_dtype.h"
#include "par_status.h"

typedef struct par_images {
    size_t n;            // records
    size_t height, width, channels;
    size_t n_features;   // height * width * channels
    uint8_t *pixels;     // n * n_features, record-major; NULL once resampled
    uint8_t *labels;     // n, each < n_classes
    void *values;        // NULL, or (par_images_upscale) n * n_features features of
    par_dtype values_dt; //   type values_dt, already scaled to [0, 1]
    size_t upscale;      // 0, or the side S the images were resampled to
} par_images;

typedef struct par_dataset {
    char name[64];       // "mnist", "fashion-mnist", "cifar10", or the folder given
    char dir[512];       // folder the files came from
    par_images train;    // the whole training file
    par_images test;
    size_t n_train;      // records [0, n_train) of `train` are for training
    size_t n_val;        // records [n_train, n_train + n_val) are validation
    size_t n_classes;    // 10
} par_dataset;

// Loads an IDX image file and its label file (each raw or gzip, detected by
// content). Validates magic numbers, rank, dimensions against the file
// length, matching record counts, labels < n_classes. Errors name the file.
par_status par_idx_load(par_images *out, const char *images_path, const char *labels_path,
                        size_t n_classes);

// CIFAR-10 binary format: records of 1 label byte and 3072 pixel bytes
// (1024 R, then 1024 G, then 1024 B, each 32 x 32 row-major). Loads the files
// paths[0..n_paths) (each raw or gzip) one after the other into one set of
// 32 x 32 x 3 images, features channel-major as stored. Each file must be a
// non-empty whole number of records, labels < n_classes. Errors name the file.
enum { PAR_CIFAR_SIDE = 32, PAR_CIFAR_FEATURES = 3072, PAR_CIFAR_RECORD = 3073 };
par_status par_cifar_load(par_images *out, const char *const *paths, size_t n_paths,
                          size_t n_classes);

// Writes a small synthetic CIFAR-10 set into the existing folder dir: the six
// files data_batch_1.bin .. data_batch_5.bin (file k = 0..4) and
// test_batch.bin (k = 5), n_records records each. With
// bits(j) = par_rng_bits(seed, PAR_RNG_DATA, 100 + k, r * 3073 + j), record r of
// file k has label = bits(0) % 10 and pixel f (channel c = f / 1024, row
// y = f % 1024 / 32, column x = f % 32) = (bits(1 + f) >> 57) + (on ? 128 : 0),
// where on = ((y / 8) * 4 + x / 8 + 5 * c) % 10 == label: each class lights
// its own 8 x 8 blocks in each colour over noise in 0..127 (learnable).
par_status par_cifar_make(const char *dir, size_t n_records, uint64_t seed);

// `what` is a name ("mnist", "fashion-mnist", "cifar10") or a folder (a path
// with a '/', or an existing folder of that name here) holding train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (each optionally .gz), or
// the CIFAR-10 files data_batch_1.bin .. data_batch_5.bin and test_batch.bin
// (directly or in its subfolder cifar-10-batches-bin, as the CIFAR-10 archive
// unpacks). Names are looked up in $PARITY_DATA/<name>, then
// $HOME/.cache/parity/data/<name> (for cifar10 also in their
// cifar-10-batches-bin), then (for fashion-mnist)
// /usr/share/datasets/fashion-mnist. The last 10% of the training file(s)
// becomes the validation set (val_fraction_pct = 10).
par_status par_dataset_open(par_dataset *ds, const char *what, int val_fraction_pct);

// Resamples every image of im to S x S (each channel separately; S larger or
// smaller than the source, or equal: then the values equal pixel / 255
// bitwise). Bilinear, with the source coordinate of output column x being
// sx = (x + 0.5) * W / S - 0.5 clamped to [0, W - 1] (rows the same with H),
// x0 = floor(sx), x1 = min(x0 + 1, W - 1), fx = sx - x0, and
// v = ((1 - fy) * ((1 - fx) * p00 + fx * p01) + fy * ((1 - fx) * p10 + fx * p11)) / 255
// evaluated in double in that order (p00 = pixel (y0, x0), p01 = (y0, x1),
// p10 = (y1, x0), p11 = (y1, x1)), then rounded once to dt. The values go to
// im->values (type dt), im->pixels is freed, n_features becomes C * S * S.
// 1 <= S <= 1024. On error im is unchanged.
par_status par_images_upscale(par_images *im, size_t S, par_dtype dt);

// par_images_upscale on the training and the test images.
par_status par_dataset_upscale(par_dataset *ds, size_t S, par_dtype dt);

// The bytes behind the features of im: pixels (n * n_features bytes), or the
// resampled values (n * n_features * sizeof dtype). For digests.
const void *par_images_bytes(const par_images *im, size_t *n_bytes);

void par_images_free(par_images *im);
void par_dataset_free(par_dataset *ds);

// x[s][f] = pixels[idx[s]][f] / 255 in dtype dt (x holds B * n_features
// elements of dt), labels[s] = labels[idx[s]]. Resampled images: x[s][f] =
// values[idx[s]][f]; precondition dt == values_dt, or values_dt f64 (then
// rounded to f32, the same value as resampling for f32 gives).
void par_data_gather(const par_images *im, const size_t *idx, size_t B, par_dtype dt,
                     void *x, int32_t *labels);

// A batch's records, to be gathered a range at a time (par_batch.fill).
typedef struct par_data_batch {
    const par_images *im;
    const size_t *idx;   // the batch's records
    par_dtype dt;
} par_data_batch;

// par_batch.fill: samples [lo, hi) of the batch (a par_data_batch) at their
// places in x and labels.
void par_data_batch_fill(void *batch, size_t lo, size_t hi, void *x, int32_t *labels);

#endif
