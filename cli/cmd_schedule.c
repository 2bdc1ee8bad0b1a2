/* cmd_schedule.c: `plumb schedule` (placeholder until its part lands; it refuses to run). */
#include "cli/cli.h"

int cmd_schedule(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("schedule", "this command is not built yet");
}
