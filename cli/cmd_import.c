/* cmd_import.c: `plumb import` (placeholder until its part lands; it refuses to run). */
#include "cli/cli.h"

int cmd_import(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("import", "this command is not built yet");
}
