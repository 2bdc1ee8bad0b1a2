/* cmd_info.c: `plumb info` (placeholder until its part lands; it refuses to run). */
#include "cli/cli.h"

int cmd_info(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("info", "this command is not built yet");
}
