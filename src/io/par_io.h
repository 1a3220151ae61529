// The io module's headers in one, for a caller that uses several: .npz
// weights (par_npz.h), digests and output paths (par_hash.h), the JSONL
// step log (par_log.h), checkpoints (par_ckpt.h) and the log's place in
// them (par_ckpt_log.h). A caller of one of them includes that one.
#ifndef PAR_IO_H
#define PAR_IO_H

#include "par_ckpt.h"
#include "par_ckpt_log.h"
#include "par_hash.h"
#include "par_log.h"
#include "par_npz.h"

#endif
