/* cmd_compare.c: `plumb compare` (placeholder until its part lands; it refuses to run). */
#include "cli/cli.h"

int cmd_compare(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("compare", "this command is not built yet");
}
