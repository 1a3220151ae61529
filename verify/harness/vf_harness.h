// The verify harness behind `parity verify`: runs a suite's cases through
// the `parity` binary (reference, every config, lockstep for fast mode,
// `parity check` for MPFR), compares, times what passed, and writes
// table.md, table.csv, results.json and loss-curve plots. Library code: it
// runs processes and writes files but never prints; progress goes through
// a hook. Results live in one jansson tree, the content of results.json.
#ifndef VF_HARNESS_H
#define VF_HARNESS_H

#include <jansson.h>
#include <stddef.h>

#include "par_status.h"
#include "par_trainer.h"
#include "vf_suite.h"

// ---- comparisons ------------------------------------------------------------

// The step lines of a JSONL log of `parity train`: losses (index k = step
// k + 1) and, when the log has them, the XXH3-128 of the weights after each
// step ("weights_xxh128"; wxxh NULL otherwise). A log of an older parity
// (step lines with "weights_sha256") is PAR_ERR_FORMAT naming the file.
typedef struct vf_log {
    long n;
    double *loss;
    char (*wxxh)[33];
} vf_log;
par_status vf_log_read(vf_log *log, const char *path);
void vf_log_free(vf_log *log);

// Bitwise comparison of two logs: the first 1-based step whose loss bits
// differ (0 if none; the shorter length + 1 if one log stops early), and
// the same for the weights' digests (0 also when a log has no digests).
long vf_losses_first_diff(const vf_log *a, const vf_log *b);
long vf_weights_first_diff(const vf_log *a, const vf_log *b);

typedef struct vf_weight_diff {
    int equal;                  // every array present, same shape, same bits
    size_t n_elements, n_diff;
    char first[160];            // "layer0.weight[3,17]" of the first differing element
    double first_a, first_b;
    double max_abs;             // largest |a - b| (Inf for NaN/Inf or a shape mismatch)
} vf_weight_diff;

// Compares two .npz weight files array by array (names, shapes, bits).
par_status vf_weights_compare(vf_weight_diff *d, const char *a_path, const char *b_path);

// ---- provenance ---------------------------------------------------------------

// What the build knows about itself (the CLI's compile definitions).
typedef struct vf_build_info {
    const char *source_dir;     // the source tree, for git (may be NULL)
    const char *compiler;       // "GNU 12.2.0"
    const char *c_flags;        // flags of this build type, warnings and contract flags
    const char *build_type;     // "RelWithDebInfo"
    const char *mpiexec;        // mpirun path
} vf_build_info;

// {"git_commit","git_dirty","compiler","c_flags","build_type","cpu","cores",
//  "os","hostname","mpi_library","mpirun_version","mpfr_version",
//  "jansson_version","libsodium_version","command_line"}; git fields are
// "unknown" outside a repository (git is only read: rev-parse, status).
json_t *vf_provenance(const vf_build_info *b, const char *command_line);

// The machine's load while timings run: the 1, 5 and 15 minute load
// averages of `path` (NULL: /proc/loadavg) as a JSON array of 3 numbers,
// or null when it cannot be read.
json_t *vf_loadavg_json(const char *path);

// The tasks runnable right now, from the fourth field ("R/N") of `path`
// (NULL: /proc/loadavg), the reading process included; -1 when it cannot be
// read. Read between two timed runs, its excess over 1 is other work
// competing for the cores: a steady competitor slows every run alike and
// leaves the CV small, but shows here.
int vf_runnable_read(const char *path);

// CPU time of `path`'s aggregate "cpu" line (NULL: /proc/stat), in
// USER_HZ ticks: total = user + nice + system + idle + iowait + irq +
// softirq + steal (guest time is already in user and nice), and steal,
// the time the hypervisor ran something else while this machine's virtual
// CPUs wanted to run. PAR_ERR_IO or PAR_ERR_FORMAT when it cannot be read.
typedef struct vf_cpu_ticks {
    unsigned long long total, steal;
} vf_cpu_ticks;
par_status vf_cpu_ticks_read(vf_cpu_ticks *t, const char *path);

// Percent of the CPU time between readings a and b that was stolen; NAN
// when no tick passed.
double vf_steal_percent(const vf_cpu_ticks *a, const vf_cpu_ticks *b);

// Probes of sm_core_round_trip_ns (sm_measure.h) (NAN: not measured):
// {"probes": n, "measured": m} and, when m > 0, "min", "median", "max" of
// the measured ones and "far": how many are above twice the fastest when
// the slowest is (0 when the distance did not change by that much).
json_t *vf_round_trip_summary(const double *ns, int n);
// The same of a JSON array of probes (numbers; null: not measured).
json_t *vf_round_trip_summary_json(const json_t *probes);

// The keys of a run's phase_seconds, k in [0, VF_N_PHASES): par_phase_names,
// then "other" (what no phase holds).
#define VF_N_PHASES (PAR_PHASE_N + 1)
const char *vf_phase_name(int k);

// ---- running a suite ---------------------------------------------------------

typedef struct vf_progress {
    const char *case_name;
    int i_case, n_cases;        // 1-based
    const char *what;           // "serial exact T=1 R=1: correctness"
    long done, total;           // tasks
    double elapsed_s, left_s;   // left_s < 0: no estimate yet
    double running_s;           // > 0: a heartbeat, the task `what` still running after this long
} vf_progress;

typedef struct vf_run_opts {
    const char *parity;         // path of the parity binary to run
    const char *out_dir;        // existing, empty folder
    vf_build_info build;        // for provenance
    const char *command_line;   // as typed, for provenance
    int cores;                  // cores of this machine (oversubscribed: T * R > cores)
    double timeout_s;           // per process
    // Set by the caller's signal handler when a signal came while no child
    // process ran (an external trainer's protocol runs in this process): the
    // protocol then ends its trainer and removes its folder, and no further
    // process starts (vf_run_suite returns PAR_ERR_EXTERNAL). NULL: none.
    volatile int *interrupted;
    void *ctx;
    void (*progress)(void *ctx, const vf_progress *p);   // may be NULL
} vf_run_opts;

// Runs every case of s and returns the results tree (*results, owned by the
// caller) with provenance. PAR_OK even when verdicts fail (see
// vf_results_verdict); an error status for what stops the run (the
// reference fails, a file cannot be written).
par_status vf_run_suite(json_t **results, const vf_suite *s, const vf_run_opts *o);

// The timed runs of config cf of case c on `cores` cores: its warm-up and timed
// rounds, 0 when it is not timed (oversubscribed, or repeats = 0).
int vf_timed_runs(const vf_case *c, const vf_config *cf, int cores);
// What the suite itself says of its time before anything runs: the seconds of
// its window-timed runs (each about 1.1 x its case's window: warm-up steps and
// the window at the calibrated config's speed), *runs of them.
double vf_suite_window_s(const vf_suite *s, int cores, long *runs);

// ---- report -----------------------------------------------------------------

// Writes table.md, table.csv and loss-curve plots (gnuplot; skipped with a
// note in table.md when gnuplot is missing) into dir, then results.json
// with the SHA-256 of those files under "files". `signed_note` is the
// sentence table.md gives about the signature.
par_status vf_report_write(json_t *results, const char *dir, const char *signed_note);

// Writes results.json only (no tables), e.g. after a runtime error.
par_status vf_results_save(const json_t *results, const char *dir);

// The overall verdict: PAR_OK when results hold at least one config, every
// config and every MPFR check has verdict "pass" and "verdict" is "pass";
// else PAR_ERR_NUMERIC with a one-line reason as the last error.
par_status vf_results_verdict(const json_t *results);

// Loads DIR/results.json, checks vf_results_verdict and that the files it
// lists under "files" are there with those SHA-256 hashes.
par_status vf_results_check(const char *dir);

// ---- plots --------------------------------------------------------------------

// loss-<case>.png in dir: the reference and every config's loss per step,
// log-scale loss, by gnuplot. PAR_ERR_IO (message says why) when gnuplot is
// missing or fails.
par_status vf_plot_case(const json_t *case_result, const char *dir, char *file, size_t file_size);

#endif
