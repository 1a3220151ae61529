// libFuzzer: verify suite files through their public loader (vf_suite_load).
// Run: ci/fuzz.sh.
#include "fuzz_common.h"
#include "vf_suite.h"

static vf_suite *suite;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!suite && !(suite = malloc(sizeof *suite))) abort();
    const char *path = fuzz_file("suite", data, size);
    par_status st = vf_suite_load(suite, path);
    if (st == PAR_OK && (suite->n_cases < 0 || suite->n_cases > VF_MAX_CASES)) abort();
    if (st == PAR_ERR_CONFIG && !memchr(suite->error, '\0', sizeof suite->error)) abort();
    return 0;
}
