// libFuzzer: model spec strings (par_model_parse) and activation names.
// A spec that parses must give a consistent layout. Run: ci/fuzz.sh.
#include "fuzz_common.h"
#include "par_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[512];
    if (size >= sizeof s) size = sizeof s - 1;
    memcpy(s, data, size);
    s[size] = '\0';
    par_act act;
    (void)par_act_parse(&act, s);
    par_model m;
    if (par_model_parse(&m, s, PAR_ACT_TANH) == PAR_OK) {
        size_t n = 0;
        for (int v = 0; v < m.n_views; v++) {
            if (m.views[v].offset != n) abort();
            n += m.views[v].count;
        }
        if (n != m.n_params || m.n_layers < 1 || m.n_layers > PAR_MAX_LAYERS) abort();
    }
    return 0;
}
