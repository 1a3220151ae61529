// Key paths and table signing shared by `parity table` and `parity verify`
// (src/cli/cmd_table.c).
#ifndef CLI_SIGN_H
#define CLI_SIGN_H

#include <stddef.h>

// ~/.config/parity/parity.key (pub = 0) or parity.pub; "" when HOME is unset.
void cli_default_key(char *buf, size_t n, int pub);

// The public key beside a secret key: FILE.key -> FILE.pub, else FILE.pub.
void cli_pub_of(char *buf, size_t n, const char *key);

// The signature's name beside results.json: the one `minisign -Vm FILE`
// looks for. Tables signed before 0.x used CLI_SIG_OLD; `table verify`
// still reads it when there is no CLI_SIG_NAME.
#define CLI_SIG_NAME "results.json.minisig"
#define CLI_SIG_OLD "results.json.sig"

// Signs DIR/results.json into DIR/results.json.minisig with the secret key,
// printing one line; returns an exit code (0, or 3 with a hint).
int cli_sign_dir(const char *cmd, const char *dir, const char *key);

#endif
