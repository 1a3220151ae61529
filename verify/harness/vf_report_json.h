// Reading results.json's values for the report and its checks (vf_report.c,
// vf_results.c): a missing member reads as "", NaN or 0.
#ifndef VF_REPORT_JSON_H
#define VF_REPORT_JSON_H

#include <jansson.h>
#include <math.h>
#include <stdio.h>

static inline const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static inline double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static inline long integer(const json_t *o, const char *key)
{
    return (long)json_integer_value(json_object_get(o, key));
}

// "serial exact T=1 R=1" of a config's result; "NAME world 2" of an
// external case's.
static inline void label(char *buf, size_t n, const json_t *cf)
{
    if (json_is_true(json_object_get(cf, "external")))
        snprintf(buf, n, "%s world %ld", str(cf, "trainer"), integer(cf, "ranks"));
    else
        snprintf(buf, n, "%s %s T=%ld R=%ld", str(cf, "trainer"), str(cf, "mode"),
                 integer(cf, "threads"), integer(cf, "ranks"));
}

#endif
