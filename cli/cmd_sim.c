/* cmd_sim.c: `plumb sim` (placeholder until its part lands; it refuses to run). */
#include "cli/cli.h"

int cmd_sim(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("sim", "this command is not built yet");
}
