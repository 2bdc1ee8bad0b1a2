/* cmd_ui.c: `plumb ui` (placeholder until its part lands; it refuses to run). */
#include "cli/cli.h"

int cmd_ui(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("ui", "this command is not built yet");
}
