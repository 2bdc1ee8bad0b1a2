/* cmd_plan.c: `plumb plan` (placeholder until its part lands; it refuses to run). */
#include "cli/cli.h"

int cmd_plan(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("plan", "this command is not built yet");
}
