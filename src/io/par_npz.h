// Weights as NumPy .npz (par_npz.c): one array per view of the parameter
// buffer, loadable with numpy.load; written to "<path>.tmp.<pid>" and
// renamed into place, so a failure never leaves a half-written file under
// the final name. Tests: tests/unit/test_io.c.
#ifndef PAR_NPZ_H
#define PAR_NPZ_H

#include <stddef.h>

#include "par_dtype.h"
#include "par_model.h"
#include "par_status.h"

// One array of an .npz archive.
typedef struct par_array {
    char name[64];        // archive member without ".npy"
    par_dtype dtype;      // '<f4' or '<f8' (when int_bytes is 0)
    int int_bytes;        // 0: floating point; 4 or 8: little-endian signed integers
                          //   ('<i4', '<i8': labels, record numbers)
    int ndim;
    size_t shape[4];
    size_t count;         // product of shape
    void *data;           // count elements, owned by the archive
} par_array;

typedef struct par_npz {
    size_t n;
    par_array *arrays;
} par_npz;

// Writes arrays[0..n) as an uncompressed .npz (members "<name>.npy",
// format version 1.0, little-endian, C order). Atomic (temp + rename).
par_status par_npz_write(const char *path, const par_array *arrays, size_t n);

// Bytes of one element of a.
static inline size_t par_array_elem_size(const par_array *a)
{
    return a->int_bytes ? (size_t)a->int_bytes : par_dtype_size(a->dtype);
}

// Reads an .npz (stored or deflated members, as numpy writes them) holding
// '<f4' or '<f8' arrays in C order. Errors name the file and the member.
par_status par_npz_read(par_npz *out, const char *path);
// The same, taking '<i4' and '<i8' arrays too (int_bytes set).
par_status par_npz_read_ints(par_npz *out, const char *path);
void par_npz_free(par_npz *z);

// Weights of model m (buffer of dtype dt) as one array per view, named and
// shaped like m->views (dense weight (n_out, n_in) as torch.nn.Linear).
par_status par_weights_save(const char *path, const par_model *m, par_dtype dt, const void *params);

// Loads weights saved for the same architecture: every view present, with
// the same shape; arrays of the other dtype are converted (f64 -> f32 is a
// rounding, reported by nothing; save in the run's dtype to be exact).
par_status par_weights_load(const char *path, const par_model *m, par_dtype dt, void *params);

#endif
