/* cmd_sweep.c: `plumb sweep` (placeholder until its part lands; it refuses to run). */
#include "cli/cli.h"

int cmd_sweep(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("sweep", "this command is not built yet");
}
