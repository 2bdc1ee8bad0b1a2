/* cmd_profile.c: `plumb profile` (placeholder until its part lands; it refuses to run). */
#include "cli/cli.h"

int cmd_profile(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("profile", "this command is not built yet");
}
